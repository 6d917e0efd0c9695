"""The documentation's performance pages, rendered from the benchmarks' own results at build time: every
`benchmarks/results/*.json` as tables (its plot beside it when the benchmark drew one), and every GPU check run's
`summary.md` under `benchmarks/results/gpu/`. A benchmark rerun, or a new one, shows without editing a page."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from reference import GENERATED, cell

SCALARS = (str, int, float, bool, type(None))


def _flat(row: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A row's scalars, nested objects' ones named `outer.inner`; lists of scalars joined."""
    flat: dict[str, Any] = {}
    for key, value in row.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flat(value, f"{name}."))
        elif _scalar_list(value):
            flat[name] = ", ".join(map(str, value))
        elif isinstance(value, SCALARS):
            flat[name] = value
        else:
            flat[name] = json.dumps(value)
    return flat


def _table(rows: list[dict[str, Any]]) -> list[str]:
    flat = [_flat(row) for row in rows]
    columns = list(dict.fromkeys(key for row in flat for key in row))
    lines = ["| " + " | ".join(cell(column) for column in columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(row.get(column, "")) for column in columns) + " |" for row in flat]
    return lines + [""]


def _render(value: Any, heading: str, depth: int) -> list[str]:
    """A result's value: scalars as a two-column table, lists of objects as a table each, objects by their keys."""
    if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        return [f"{'#' * depth} {heading}\n", *_table(value)]
    if isinstance(value, dict):
        scalars = {key: item for key, item in value.items() if not isinstance(item, (dict, list)) or _scalar_list(item)}
        lines = [f"{'#' * depth} {heading}\n"] if heading else []
        if scalars:
            lines += ["| | |", "|---|---|"]
            lines += [f"| {cell(key)} | {cell(_flat({key: item})[key])} |" for key, item in scalars.items()]
            lines.append("")
        for key, item in value.items():
            if key not in scalars:
                lines += _render(item, key, min(depth + 1, 6))
        return lines
    return [f"{'#' * depth} {heading}\n", f"`{cell(json.dumps(value))}`", ""]


def _scalar_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, SCALARS) for item in value)


def results_page(results: Path) -> tuple[str, list[Path]]:
    """The page of every top-level result, and the plots it shows (to be copied beside it)."""
    lines = [
        "# Performance\n",
        GENERATED,
        "Every benchmark's latest result, as its script wrote it under `benchmarks/results/`. How each was run, on "
        "which machine and what the figures mean: [Benchmarks](development/benchmarks.md), "
        "[Running on a CPU](guides/cpu.md) and [GPU deployment](guides/gpu.md). GPU check runs: "
        "[GPU runs](performance-gpu.md).\n",
    ]
    plots = []
    for path in sorted(results.glob("*.json")):
        lines.append(f"## {path.stem}\n")
        lines.append(f"`benchmarks/results/{path.name}`\n")
        plot = path.with_suffix(".png")
        if plot.exists():
            plots.append(plot)
            lines.append(f"![{path.stem}](performance/{plot.name})\n")
        lines += _render(json.loads(path.read_text()), "", 2)  # its keys under the result's own heading
    return "\n".join(lines), plots


def gpu_runs_page(results: Path) -> tuple[str, list[Path]]:
    """Every GPU check run's summary, newest first, with its plots."""
    lines = ["# GPU runs\n", GENERATED, "Each run of `tools/gpu_check.sh` on a lent GPU, newest first.\n"]
    plots = []
    runs = sorted((results / "gpu").glob("*/summary.md"), key=lambda path: _run_order(path.parent.name), reverse=True)
    for summary in runs:
        run = summary.parent
        lines.append(f"## {run.name}\n")
        lines.append(_demoted(summary.read_text()))
        for plot in sorted(run.glob("*.png")):
            plots.append(plot)
            lines.append(f"![{run.name} {plot.stem}](performance/gpu/{run.name}/{plot.name})\n")
    return "\n".join(lines), plots


def _run_order(name: str) -> tuple[str, str]:
    """`h100-2026-11-27-run1` sorts by its date, then its run."""
    found = re.search(r"(\d{4}-\d{2}-\d{2})-(run\d+)", name)
    return (found.group(1), found.group(2)) if found else ("", name)


def _demoted(markdown: str) -> str:
    """A summary's headings two levels down, under its run's heading."""
    return re.sub(r"^(#{1,4}) ", lambda match: "#" * min(len(match.group(1)) + 2, 6) + " ", markdown, flags=re.M)
