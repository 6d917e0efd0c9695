"""An evaluation's report: `report.json` (every configuration's rates with their intervals, each sentence's
transcript and edits, the command and the versions that made them), `report.md` (the table a person reads) and,
where matplotlib is installed (the `eval` extra), `report.png` (error rate and speed per configuration)."""

from __future__ import annotations

import json
import platform
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from .scoring import CHARACTER_LANGUAGES, Rate, Scored

PACKAGES = ("qwen3-tts-server", "torch", "jiwer", "datasets")


@dataclass(frozen=True)
class Row:
    """One configuration's line of the report."""

    label: str
    details: dict[str, Any]  # what it was: model, dtype, quantisation, device
    overall: Rate
    by_language: dict[str, Rate]
    figures: dict[str, float]  # named: the real-time factor, a clone's similarity, ...
    scored: tuple[Scored, ...]


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for package in PACKAGES:
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "not installed"
    return found


def metric(code: str) -> str:
    return "CER" if code in CHARACTER_LANGUAGES else "WER"


def percent(rate: Rate) -> str:
    return f"{100 * rate.rate:.1f}% ({100 * rate.low:.1f}-{100 * rate.high:.1f})"


def document(kind: str, rows: list[Row], context: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": kind,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "versions": versions(),
        **context,
        "configurations": [
            {
                "label": row.label,
                **row.details,
                "error_rate": asdict(row.overall),
                "by_language": {
                    code: {"metric": metric(code), **asdict(rate)} for code, rate in row.by_language.items()
                },
                **row.figures,
                "sentences": [asdict(item) for item in row.scored],
            }
            for row in rows
        ],
    }


def markdown(title: str, rows: list[Row], context: dict[str, Any]) -> str:
    """The table: each configuration's error rate over all sentences and by language (95% intervals), its figures."""
    codes = list(dict.fromkeys(code for row in rows for code in row.by_language))
    figures = list(dict.fromkeys(name for row in rows for name in row.figures))
    header = ["configuration", "all", *(f"{code} ({metric(code)})" for code in codes), *figures]
    lines = [f"# {title}", "", *(f"- {name}: {value}" for name, value in context.items()), ""]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = [row.label, percent(row.overall), *(percent(row.by_language[code]) for code in codes)]
        cells += [f"{row.figures[name]:.3f}" if name in row.figures else "" for name in figures]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "Error rates are corpus rates (every edit over every reference word; characters for Chinese, Japanese and "
        "Korean; `all` pools them) after the same normalisation of both sides, with 95% intervals from resampling "
        "the sentences. Command and versions: report.json.",
        "",
    ]
    return "\n".join(lines)


def plot(rows: list[Row], figure_name: str, path: Path) -> bool:
    """Error rate (with its interval) and the figure `figure_name` per configuration, side by side; False without
    matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    labels = [row.label for row in rows]
    figure, (rates, speeds) = plt.subplots(1, 2, figsize=(4 + 1.2 * len(rows), 3.5))
    values = [100 * row.overall.rate for row in rows]
    below = [value - 100 * row.overall.low for value, row in zip(values, rows, strict=True)]
    above = [100 * row.overall.high - value for value, row in zip(values, rows, strict=True)]
    rates.bar(labels, values, yerr=[below, above], capsize=4)
    rates.set_ylabel("error rate, % (95% interval)")
    speeds.bar(labels, [row.figures.get(figure_name, 0.0) for row in rows], color="tab:orange")
    speeds.set_ylabel(figure_name.replace("_", " "))
    for axis in (rates, speeds):
        axis.tick_params(axis="x", rotation=30)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return True


def write(out: Path, kind: str, title: str, rows: list[Row], context: dict[str, Any], plotted: str) -> list[Path]:
    """The report's files in `out`: JSON, Markdown and (with matplotlib) the plot."""
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "report.json", out / "report.md"]
    written[0].write_text(json.dumps(document(kind, rows, context), indent=1, ensure_ascii=False) + "\n")
    written[1].write_text(markdown(title, rows, context), encoding="utf-8")
    if plot(rows, plotted, out / "report.png"):
        written.append(out / "report.png")
    return written
