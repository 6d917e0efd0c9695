"""MkDocs hooks (mkdocs.yml `hooks:`): the pages written from the code and the repository at build time. The site's
home is README.md and its changelog CHANGELOG.md, their links made relative to docs/; the reference pages come from
tools/docs/reference.py and the performance pages from tools/docs/performance.py. None of them is stored in docs/."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

sys.path.insert(0, str(Path(__file__).parent))  # the hook is loaded by path; its siblings are imported by name

import performance  # noqa: E402
import reference  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def docs_relative(markdown: str) -> str:
    """A repository-root page's links as seen from docs/: `docs/x.md` is `x.md`, `CHANGELOG.md` is `changelog.md`,
    a benchmark's plot the copy the performance page shows."""
    markdown = re.sub(r"\]\(docs/", "](", markdown)
    markdown = re.sub(r"\]\(benchmarks/results/", "](performance/", markdown)  # the plots, copied there
    return re.sub(r"\]\(CHANGELOG\.md", "](changelog.md", markdown)


def on_files(files: Files, config: MkDocsConfig) -> Files:
    pages = {
        "index.md": docs_relative((ROOT / "README.md").read_text(encoding="utf-8")),
        "changelog.md": (ROOT / "CHANGELOG.md").read_text(encoding="utf-8"),
        "reference/settings.md": reference.settings_page(),
        "reference/cli.md": reference.cli_page(),
        "development/layout.md": reference.layout_page(),
        "reference/protocols.md": reference.protocols_page(),
    }
    with reference.served_app() as app:
        pages["reference/http.md"] = reference.http_page(app)
        pages["reference/metrics.md"] = reference.metrics_page(app)
    results = ROOT / "benchmarks" / "results"
    pages["performance.md"], plots = performance.results_page(results)
    pages["performance-gpu.md"], gpu_plots = performance.gpu_runs_page(results)
    for uri, content in pages.items():
        files.append(File.generated(config, uri, content=content))
    for plot in plots + gpu_plots:
        uri = "performance/" + plot.relative_to(results).as_posix()
        files.append(File.generated(config, uri, abs_src_path=str(plot)))
    return files
