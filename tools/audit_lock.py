"""Known vulnerabilities in the runtime lock (requirements.lock), from PyPI's advisories, as CI checks them.

    .venv/bin/python tools/audit_lock.py

Each hashed pin is looked up as it is (pip-audit; nothing resolved or installed). A vulnerability that a release
fixes fails the check (move the pin there); one that no release fixes yet is listed. A pin the advisory service
could not be asked about is counted and named: where the registry in reach serves no advisories, nothing is
checked, and the output says so instead of passing quietly.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    audit = subprocess.run(
        [Path(sys.executable).parent / "pip-audit", "--requirement", ROOT / "requirements.lock", "--disable-pip"]
        + ["--progress-spinner", "off", "--format", "json"],
        capture_output=True,
        text=True,
    )
    if not audit.stdout.strip():
        print(audit.stderr, file=sys.stderr)
        return 1
    dependencies = json.loads(audit.stdout)["dependencies"]
    found = [(dep, vuln) for dep in dependencies for vuln in dep.get("vulns", [])]
    for dep, vuln in found:
        fixed = ", ".join(vuln["fix_versions"]) or "no release yet"
        print(f"{dep['name']}=={dep['version']}: {vuln['id']} (fixed in {fixed})")
    skipped = [dep["name"] for dep in dependencies if "skip_reason" in dep]
    checked = len(dependencies) - len(skipped)
    print(f"pip-audit: {checked} of {len(dependencies)} pins checked, {len(found)} known vulnerabilities")
    if skipped:
        print(f"warning: no advisories could be fetched for {len(skipped)} pins: {', '.join(skipped)}")
    return 1 if any(vuln["fix_versions"] for _, vuln in found) else 0


if __name__ == "__main__":
    sys.exit(main())
