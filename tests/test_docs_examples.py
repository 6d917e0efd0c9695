"""Examples that cannot rot: every code block of README.md and docs/ marked `<!-- runnable -->` (the line before its
fence) runs against a live server of tiny models (speech, a transcriber, an aligner), a page's blocks in order in
one folder (a later block may read what an earlier one wrote). `localhost:8000` in a block (with or without its
scheme) is the server's address; `bash` blocks run under `set -euo pipefail` with curl failing on an HTTP error,
`python` blocks with this interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from qwen3_tts_server.testing.live_server import live_server

ROOT = Path(__file__).parents[1]
MARK = "<!-- runnable -->"
ADDRESS = "localhost:8000"
# An example's curl fails on an HTTP error (it exits 0 on one by itself).
CURL_FAILS = 'curl() { command curl --fail-with-body "$@"; }\n'
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def runnable_blocks(page: Path) -> list[tuple[int, str, str]]:
    """(line, language, code) of each marked block of `page`, in order."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks = []
    for index, line in enumerate(lines):
        if line.strip() != MARK:
            continue
        fence = lines[index + 1]
        assert fence.startswith("```"), f"{page.name}:{index + 1}: {MARK} is not followed by a code block"
        end = next(at for at in range(index + 2, len(lines)) if lines[at].startswith("```"))
        blocks.append((index + 2, fence.strip("`").split()[0], "\n".join(lines[index + 2 : end])))
    return blocks


EXAMPLES = {page: runnable_blocks(page) for page in PAGES if runnable_blocks(page)}


@pytest.fixture(scope="module")
def server(both_families):
    models = ("--model", str(both_families["asr"]), "--model", str(both_families["aligner"]))
    with live_server(both_families["speech"], *models) as base:
        yield base


def test_the_readme_tour_is_runnable():
    languages = [language for _, language, _ in EXAMPLES.get(ROOT / "README.md", [])]
    assert languages.count("bash") >= 2 and "python" in languages  # curl speech and transcription, the SDK


@pytest.mark.parametrize("page", list(EXAMPLES), ids=lambda page: str(page.relative_to(ROOT)))
def test_a_pages_runnable_examples_run(page, server, tmp_path):
    env = {**os.environ, "OPENAI_API_KEY": os.environ.get("OPENAI_API_KEY", "unused"), "HF_HUB_OFFLINE": "1"}
    for line, language, code in EXAMPLES[page]:
        code = code.replace(f"http://{ADDRESS}", server).replace(ADDRESS, server.removeprefix("http://"))
        if language in ("bash", "sh", "shell"):
            command = ["bash", "-euo", "pipefail", "-c", CURL_FAILS + code]
        elif language == "python":
            command = [sys.executable, "-c", code]
        else:
            raise AssertionError(f"{page.name}:{line}: a runnable block in {language!r}, not bash or python")
        ran = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
        assert ran.returncode == 0, f"{page.name}:{line} failed ({ran.returncode}):\n{ran.stdout}\n{ran.stderr}"
