"""Time from Speak to the first sound in the web playground, in headless Chromium against a live server, and the
page's weight.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/playground_first_sound.py [--model DIR] [--runs 10]

Measured in the page (window.playground): performance.now() at the click on Speak, to the page hearing from its
AudioWorklet that it output the run's first samples (first sound), and to the first binary WebSocket frame (first
audio). Each run is stopped once it sounds. The page weight is the sum of the bodies of the page and of every file
under /playground/ as served (no compression); the page loads them all (the AudioWorklet's module with the first
Speak, a fetch Playwright does not see).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from pathlib import Path

import httpx
from playwright.sync_api import sync_playwright

from qwen3_tts_server.api.playground import PAGE, assets
from qwen3_tts_server.testing.live_server import live_server
from qwen3_tts_server.testing.random_checkpoint import make_test_model

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--autoplay-policy=no-user-gesture-required"]
TEXT = "Hello! This is Qwen3-TTS, speaking while it is generated."
OUT = Path(__file__).resolve().parent / "results" / "playground_first_sound.json"


def summary(samples: list[float]) -> dict:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"p50_ms": round(statistics.median(ordered), 1), "p95_ms": round(p95, 1)}


def page_weight(base: str) -> dict[str, int]:
    """Bytes served for the page and each of its files."""
    paths = ["/", *(f"/playground/{name}" for name in assets() if name != PAGE)]
    with httpx.Client(base_url=base, timeout=30) as client:
        return {path: len(client.get(path).raise_for_status().content) for path in paths}


def measure(base: str, runs: int) -> dict:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.goto(base + "/")
        page.wait_for_function("() => document.querySelector('#voice').options.length > 0")
        page.fill("#text", TEXT)
        first_sound, first_audio = [], []
        for run in range(runs + 1):  # the first warms up the audio context and the worklet
            page.fill("#seed", str(run))
            page.click("#speak")
            page.wait_for_function("() => window.playground.firstSoundMs !== null", timeout=60_000)
            state = page.evaluate("window.playground")
            page.click("#stop")
            page.wait_for_function("() => !window.playground.running", timeout=60_000)
            if run:
                first_sound.append(state["firstSoundMs"])
                first_audio.append(state["firstAudioMs"])
        version = browser.version
        browser.close()
    files = page_weight(base)
    return {
        "chromium": version,
        "first_sound": summary(first_sound),
        "first_audio": summary(first_audio),
        "page_weight_kib": round(sum(files.values()) / 1024, 1),
        "page_files_bytes": files,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, help="CustomVoice checkpoint (default: a random-weight tiny one)")
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    load = os.getloadavg()[0]  # a shared machine: how busy it was before this run
    with tempfile.TemporaryDirectory() as scratch:
        model = args.model or make_test_model(Path(scratch) / "tiny", size="tiny", model_type="custom_voice")
        with live_server(model) as base:
            results = measure(base, args.runs)
    for name in ("first_sound", "first_audio"):
        row = results[name]
        print(f"Speak to {name.replace('_', ' '):<12} p50 {row['p50_ms']:.1f} ms  p95 {row['p95_ms']:.1f} ms")
    print(f"page weight {results['page_weight_kib']} KiB in {len(results['page_files_bytes'])} files")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    meta = {
        "runs": args.runs,
        "model": str(args.model or "tiny (random weights)"),
        "text": TEXT,
        "load_average_1m_before": round(load, 2),
    }
    OUT.write_text(json.dumps({"meta": meta, "results": results}, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
