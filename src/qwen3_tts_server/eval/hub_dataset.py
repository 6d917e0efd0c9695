"""`eval asr --dataset`: the recordings of a `datasets` dataset (a hub id such as openslr/librispeech_asr or
google/fleurs, or a local dataset folder), streamed, so that `--limit` reads no more than the rows it takes. The
audio is read undecoded and decoded by the server's own audio reader (PyAV), which needs none of `datasets`' audio
extras."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from ..errors import InvalidInputError, TTSError
from .asr import Recording, checked_language

# the names a transcript goes by in the common speech sets (LibriSpeech, Common Voice, FLEURS, VoxPopuli, ...)
TEXT_COLUMNS = ("text", "sentence", "transcription", "transcript", "normalized_text", "raw_transcription")
PROGRESS_EVERY = 100  # recordings read between two progress lines


@dataclass(frozen=True)
class DatasetSource:
    name: str  # hub id or local folder
    config: str | None
    split: str
    audio_column: str
    text_column: str | None  # None: the first of TEXT_COLUMNS the dataset has
    revision: str | None = None  # a hub dataset's branch, tag or commit (None: its main branch)

    @property
    def described(self) -> str:
        """The dataset and the part of it read, as the report and every error name them."""
        revision = f", revision {self.revision}" if self.revision else ""
        return f"{self.name} ({self.config or 'its default configuration'}, split {self.split}{revision})"


def dataset_recordings(
    source: DatasetSource, language: str, limit: int | None, said: Callable[[str], None]
) -> list[Recording]:
    """The first `limit` rows (all without one) of the source's split as recordings, in the dataset's order; a
    dataset that cannot be loaded, a missing column, a row without audio or text, or no row at all is refused."""
    checked_language(language)
    try:
        import datasets
    except ImportError:
        raise InvalidInputError("--dataset needs the `eval` extra: pip install 'qwen3-tts-server[eval]'") from None

    named = source.described
    said(f"reading {named}")
    try:
        rows = datasets.load_dataset(
            source.name, source.config, split=source.split, revision=source.revision, streaming=True
        )
    except (OSError, ValueError) as exc:  # not found, offline, unknown configuration or split
        raise InvalidInputError(f"cannot load the dataset {named}: {exc}", param="dataset") from None
    except RuntimeError as exc:  # a dataset still built by a loading script, which `datasets` 4 and later refuse
        raise InvalidInputError(
            f"cannot load the dataset {named}: {exc} (`datasets` no longer runs loading scripts: use a copy of the "
            "dataset in Parquet)",
            param="dataset",
        ) from None
    columns = list(rows.features or next(iter(rows), {}))
    text_column = _text_column(source, columns)
    if source.audio_column not in columns:
        raise InvalidInputError(
            f"the dataset has no audio column {source.audio_column!r} (--audio-column); its columns: "
            + ", ".join(columns),
            param="audio_column",
        )
    rows = rows.cast_column(source.audio_column, datasets.Audio(decode=False))
    try:
        recorded = _recordings(itertools.islice(rows, limit), source.audio_column, text_column, said)
    except ImportError as exc:  # an audio folder's files are encoded by `datasets` itself, with torchcodec
        raise InvalidInputError(f"reading {named} needs what `datasets` asks for: {exc}", param="dataset") from None
    except OSError as exc:  # the connection lost while streaming
        raise InvalidInputError(f"reading {named} failed: {exc}", param="dataset") from None
    if not recorded:
        raise InvalidInputError(f"the dataset {named} has no rows", param="dataset")
    return recorded


def _text_column(source: DatasetSource, columns: list[str]) -> str:
    if source.text_column is not None:
        if source.text_column not in columns:
            raise InvalidInputError(
                f"the dataset has no column {source.text_column!r} (--text-column); its columns: {', '.join(columns)}",
                param="text_column",
            )
        return source.text_column
    found = next((name for name in TEXT_COLUMNS if name in columns), None)
    if found is None:
        raise InvalidInputError(
            f"the dataset has none of the usual text columns ({', '.join(TEXT_COLUMNS)}): name it with --text-column; "
            f"its columns: {', '.join(columns)}",
            param="text_column",
        )
    return found


def _recordings(
    rows: Iterable[dict[str, Any]], audio_column: str, text_column: str, said: Callable[[str], None]
) -> list[Recording]:
    from ..model.asr.transcriber import heard_wave

    recorded = []
    for index, item in enumerate(rows):
        audio, text = item[audio_column], item[text_column]
        if not isinstance(text, str) or not text.strip():
            raise InvalidInputError(f"row {index} has no text in {text_column!r}", param="text_column")
        if not isinstance(audio, dict) or not (audio.get("bytes") or audio.get("path")):
            raise InvalidInputError(f"row {index} has no audio in {audio_column!r}", param="audio_column")
        name = PurePosixPath(audio.get("path") or f"row-{index}").name
        try:
            wave = heard_wave(audio.get("bytes") or _read(audio["path"]), name)
        except TTSError as exc:  # not audio, no audio stream, too short
            raise InvalidInputError(f"row {index}: {exc}", param="dataset") from None
        recorded.append(Recording(str(index), wave, text))
        if len(recorded) % PROGRESS_EVERY == 0:
            said(f"read {len(recorded)} recordings")
    return recorded


def _read(path: str) -> bytes:
    """A row's audio named by its path alone: a local file, or one on the hub (`hf://`) through fsspec."""
    import fsspec

    try:
        with fsspec.open(path, "rb") as file:
            return file.read()
    except OSError as exc:
        raise InvalidInputError(f"cannot read the row's audio {path}: {exc}", param="dataset") from None
