"""The peers, timed on the checkpoint and frame count of a `bench` run: the official qwen-tts 0.1.1 and
faster-qwen3-tts 0.5.4, each serving one request at a time (all either can do).

Each peer runs in its own process: the two ship different modules named `qwen_tts` and need different
transformers releases, none of which this package depends on. A peer is given as a Python interpreter
that has its packages (a virtual environment's `bin/python`) or as a folder of its packages, put first on
this interpreter's path (wheels installed with `pip install --target`). In that process:

    python -m qwen3_tts_server.bench.peers official|faster --model DIR --speaker NAME --frames N \
        --audio-seconds S --runs K [--device cuda] [--dtype bfloat16]

prints one JSON object (`PeerResult`). Every request makes exactly N frames: EOS cannot end it early.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
import time
import types
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from ..errors import TTSError
from .workload import BENCH_TEXT, percentile

PEERS = ("official", "faster")
FASTER_CHUNK_FRAMES = 8  # faster-qwen3-tts's published H100 figures stream 8-frame chunks


@dataclass
class PeerResult:
    peer: str
    version: str
    frames: int
    runs: int
    ttfa_p50_ms: float  # the official package returns audio only once a request is complete
    request_p50_ms: float  # one whole request
    rtf_p50: float  # x real time of one request, which is also its aggregate: one request at a time
    gpu_memory_gib: float | None


def measure_peer(
    peer: str,
    where: str,
    model: Path,
    speaker: str,
    frames: int,
    audio_seconds: float,
    runs: int,
    device: str,
    dtype: str,
) -> PeerResult:
    """Run `peer` in its own process: `where` is its interpreter, or a folder of its packages. `audio_seconds`:
    what `frames` frames of this checkpoint last."""
    if peer not in PEERS:
        raise ValueError(f"unknown peer {peer!r}; choose one of {', '.join(PEERS)}")
    env = dict(os.environ)
    source = str(Path(__file__).resolve().parents[2])  # the folder that holds this package
    if Path(where).is_dir():
        python, path = sys.executable, [where, source]
    else:
        python, path = where, [source]
    env["PYTHONPATH"] = os.pathsep.join(path + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    command = [python, "-m", "qwen3_tts_server.bench.peers", peer, "--model", str(model), "--speaker", speaker]
    command += ["--frames", str(frames), "--audio-seconds", str(audio_seconds), "--runs", str(runs)]
    command += ["--device", device, "--dtype", dtype]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise TTSError(f"peer {peer} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return PeerResult(**json.loads(done.stdout.strip().splitlines()[-1]))


# What `import qwen_tts` loads eagerly for its 25 Hz tokenizer alone, which the 12 Hz checkpoints never run.
TOKENIZER_25HZ_MODULES = (
    "sox",
    "onnxruntime",
    "einops",
    "torchaudio",
    "torchaudio.compliance",
    "torchaudio.compliance.kaldi",
)


class _Unavailable:
    """An attribute of a stand-in module: any attribute of it is another, and calling one raises."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attribute: str) -> _Unavailable:
        return _stand_in_attribute(self._name, attribute)

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self._name} is not installed here (a stand-in: only the 25 Hz tokenizer uses it)")


def _stand_in_attribute(owner: str, attribute: str) -> _Unavailable:
    if attribute.startswith("__"):  # what introspection asks (__file__, __path__...): as a plain module lacks it
        raise AttributeError(attribute)
    return _Unavailable(f"{owner}.{attribute}")


def _stand_ins() -> None:
    """Stand-ins for those modules where they are missing (sox on the GPU image; all of them in a plain venv),
    put in sys.modules before `import qwen_tts`. Both peers import `qwen_tts`."""
    for name in TOKENIZER_25HZ_MODULES:
        top = name.partition(".")[0]
        if name in sys.modules or (top not in sys.modules and importlib.util.find_spec(top) is not None):
            continue
        module = types.ModuleType(name)
        module.__getattr__ = lambda attribute, name=name: _stand_in_attribute(name, attribute)  # type: ignore[method-assign]
        module.__spec__ = importlib.machinery.ModuleSpec(name, None)
        sys.modules[name] = module
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, module)


def _official(model: Path, speaker: str, device: str, dtype: str) -> tuple[str, Callable[[int], tuple[float, float]]]:
    _stand_ins()
    import qwen_tts
    import torch
    from qwen_tts import Qwen3TTSModel

    official = Qwen3TTSModel.from_pretrained(str(model), dtype=getattr(torch, dtype), device_map=device)
    pad_id = official.model.config.talker_config.codec_pad_id

    def request(frames: int) -> tuple[float, float]:
        # The pad id, suppressed during generation, stands in as the stop id: no request stops early.
        started = time.perf_counter()
        official.generate_custom_voice(
            BENCH_TEXT, speaker=speaker, language="English", max_new_tokens=frames + 1, eos_token_id=pad_id
        )
        _sync(device)
        total = time.perf_counter() - started
        return total, total

    return getattr(qwen_tts, "__version__", "0.1.1"), request


def _faster(model: Path, speaker: str, device: str, dtype: str) -> tuple[str, Callable[[int], tuple[float, float]]]:
    from importlib.metadata import version

    _stand_ins()
    import torch
    from faster_qwen3_tts import FasterQwen3TTS

    faster = FasterQwen3TTS.from_pretrained(str(model), device=device, dtype=getattr(torch, dtype))

    def request(frames: int) -> tuple[float, float]:
        started = time.perf_counter()
        first = None
        for _audio, _rate, _timing in faster.generate_custom_voice_streaming(
            BENCH_TEXT,
            speaker=speaker,
            language="English",
            max_new_tokens=frames,
            min_new_tokens=frames,
            chunk_size=FASTER_CHUNK_FRAMES,
        ):
            first = first if first is not None else time.perf_counter() - started
        _sync(device)
        return first, time.perf_counter() - started

    return version("faster-qwen3-tts"), request


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _run(args: argparse.Namespace) -> PeerResult:
    import torch

    load = _official if args.peer == "official" else _faster
    peer_version, request = load(Path(args.model), args.speaker, args.device, args.dtype)
    request(min(args.frames, 16))  # warm-up: lazy initialisation, graph capture
    timings = [request(args.frames) for _ in range(args.runs)]
    request_seconds = percentile([total for _, total in timings], 0.5)
    gpu = torch.cuda.max_memory_allocated() / 2**30 if args.device.startswith("cuda") else None
    return PeerResult(
        peer=args.peer,
        version=peer_version,
        frames=args.frames,
        runs=args.runs,
        ttfa_p50_ms=round(1000 * percentile([first for first, _ in timings], 0.5), 1),
        request_p50_ms=round(1000 * request_seconds, 1),
        rtf_p50=round(args.audio_seconds / request_seconds, 3),
        gpu_memory_gib=None if gpu is None else round(gpu, 2),
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m qwen3_tts_server.bench.peers")
    parser.add_argument("peer", choices=PEERS)
    parser.add_argument("--model", required=True, help="checkpoint directory")
    parser.add_argument("--speaker", required=True)
    parser.add_argument("--frames", type=int, required=True)
    parser.add_argument("--audio-seconds", type=float, required=True, help="what the frames last")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    print(json.dumps(asdict(_run(parser.parse_args()))), flush=True)


if __name__ == "__main__":
    main()
