"""What a full garbage collection costs in a serving process: with what start-up made out of the collector's sight,
as the server's start-up leaves it (`start_up_objects_kept`), and with it in sight, as before. A full collection
holds the GIL while it scans: the event loop and every stream wait it out, and one comes whenever enough objects
have been made.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/full_collection.py [--runs 7]

Imports what `serve` imports, warms the text front end as its start-up does and puts that out of sight; then loads
a tiny random-weight CustomVoice model and warms it up (what serving adds, left in sight), and times `gc.collect()`
`--runs` times; then with everything in sight again. Prints min / median / max of each.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import tempfile
import time
from pathlib import Path

import qwen3_tts_server.api.app  # noqa: F401 (what serve imports)
import qwen3_tts_server.server  # noqa: F401
from qwen3_tts_server.engine.model_manager import warm_up_model
from qwen3_tts_server.model.tts.tts_model import Qwen3TTSModel
from qwen3_tts_server.resources import start_up_objects_kept
from qwen3_tts_server.testing.random_checkpoint import make_test_model
from qwen3_tts_server.text.frontend import warm_up_text_front_end


def collections_ms(runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        gc.collect()
        times.append(1000 * (time.perf_counter() - started))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    warm_up_text_front_end()
    with tempfile.TemporaryDirectory() as scratch, start_up_objects_kept():
        frozen = gc.get_freeze_count()
        model = Qwen3TTSModel.load(make_test_model(Path(scratch) / "custom_voice", size="tiny"))
        warm_up_model(model)
        in_sight = len(gc.get_objects())
        after_start_up = collections_ms(args.runs)
    everything = collections_ms(args.runs)
    print(f"objects start-up made: {frozen:,}; made after it (a model loaded and warmed up): {in_sight:,}")
    for name, values in (("start-up's out of sight", after_start_up), ("everything in sight", everything)):
        print(f"full collection, {name}: {min(values):.1f} / {statistics.median(values):.1f} / {max(values):.1f} ms")


if __name__ == "__main__":
    main()
