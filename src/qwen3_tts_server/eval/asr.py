"""`eval asr`: the error rate of a Qwen3-ASR checkpoint on the user's own recordings, in each configuration asked
for, side by side, with its speed (the real-time factor of the transcription). The recordings are a folder of
audio files, each with its text in a `.txt` file of the same name beside it, all in one language, or a dataset's
rows (`hub_dataset.py`)."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..cli_progress import transcription_progress
from ..errors import InvalidInputError
from ..model.asr.mel import SAMPLE_RATE
from ..text.language import LANGUAGE_NAMES
from .report import Row
from .scoring import score
from .speech import Configuration, described, row

AUDIO_SUFFIXES = (".wav", ".flac", ".mp3", ".ogg", ".opus", ".m4a", ".aac", ".webm")


@dataclass(frozen=True)
class Recording:
    id: str  # the file's name without its suffix
    wave: np.ndarray  # 16 kHz mono
    text: str


def checked_language(language: str) -> None:
    if language not in LANGUAGE_NAMES:
        raise InvalidInputError(f"--language is one of {', '.join(LANGUAGE_NAMES)}, not {language!r}", "language")


def recordings(folder: Path, language: str, limit: int | None = None) -> list[Recording]:
    """Every audio file in `folder` (the first `limit`) with its text (NAME.txt beside NAME.wav, ...), in name order;
    a recording without its text, an unreadable one, or none at all is refused."""
    from ..model.asr.transcriber import heard_wave

    checked_language(language)
    if not folder.is_dir():
        raise InvalidInputError(f"{folder} is not a folder", param="data")
    files = sorted(path for path in folder.iterdir() if path.suffix.lower() in AUDIO_SUFFIXES)[:limit]
    if not files:
        raise InvalidInputError(f"{folder} holds no audio file ({', '.join(AUDIO_SUFFIXES)})", param="data")
    missing = [path.name for path in files if not path.with_suffix(".txt").is_file()]
    if missing:
        raise InvalidInputError(f"no text (NAME.txt) beside {', '.join(missing[:5])}", param="data")
    return [
        Recording(path.stem, heard_wave(path.read_bytes(), path.name), path.with_suffix(".txt").read_text("utf-8"))
        for path in files
    ]


def evaluate_asr(
    checkpoint: str,
    setups: Sequence[Configuration],
    recorded: Sequence[Recording],
    language: str,
    said: Callable[[str], None],
) -> list[Row]:
    """Each configuration's line: the transcriber loaded in it hears every recording, its language forced."""
    from ..engine.recognition import load_transcriber

    seconds = sum(len(item.wave) for item in recorded) / SAMPLE_RATE
    waves, languages = [item.wave for item in recorded], [LANGUAGE_NAMES[language]] * len(recorded)
    rows = []
    for setup in setups:
        said(f"transcribing {len(recorded)} recordings ({seconds:.0f} s) in {setup.label} ({described(setup)})")
        transcriber = load_transcriber(checkpoint, setup.device, setup.dtype, setup.quantize)
        started = time.perf_counter()
        with transcription_progress() as progress:
            heard = transcriber.transcribe(waves, languages, progress=progress)
        spent = time.perf_counter() - started
        scored = [
            score(item.id, language, item.text, result.text) for item, result in zip(recorded, heard, strict=True)
        ]
        rows.append(row(checkpoint, setup, scored, {"real_time_factor": spent / seconds}))
        del transcriber
        gc.collect()
    return rows
