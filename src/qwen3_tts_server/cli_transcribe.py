"""`qwen3-tts-server transcribe FILE...`: audio files to text, JSON, SubRip or WebVTT with a Qwen3-ASR checkpoint
(and a ForcedAligner for word timestamps), the files decoded side by side."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from .cli_precision import add_dtype_flag, flag_precision, flag_settings
from .errors import InvalidInputError

FORMATS = {"text": ".txt", "json": ".json", "srt": ".srt", "vtt": ".vtt"}


def add_transcribe(sub: argparse._SubParsersAction, speed_flags: Any) -> None:
    p = sub.add_parser(
        "transcribe",
        help="transcribe audio files (text, json, srt, vtt)",
        description="Transcribe audio files (wav, flac, mp3, ogg/opus, m4a/aac, webm, mu-law WAV, ...) with a "
        "Qwen3-ASR checkpoint; word timestamps, SubRip and WebVTT need a ForcedAligner checkpoint too.",
    )
    p.add_argument("files", nargs="+", type=Path, metavar="FILE")
    p.add_argument("--model", required=True, help="Qwen3-ASR checkpoint directory or hub id (Qwen/Qwen3-ASR-0.6B)")
    p.add_argument("--aligner", help="ForcedAligner checkpoint directory or hub id (Qwen/Qwen3-ForcedAligner-0.6B)")
    p.add_argument("--language", help="the language spoken, by name or ISO 639 code (default: identified)")
    p.add_argument("--context", default="", help="text that helps recognition: names, terms, the topic")
    p.add_argument("--timestamps", action="store_true", help="word timestamps (needs --aligner)")
    p.add_argument(
        "--korean-words",
        type=Path,
        metavar="FILE",
        help="the official Korean word list (korean_dict_jieba.dict from the qwen-asr package) for Korean word "
        "timestamps (default: an installed qwen-asr's own)",
    )
    p.add_argument("--format", choices=tuple(FORMATS), default="text", help="output format (default text)")
    p.add_argument(
        "-o", "--output", type=Path, help="output file (one input) or directory (several); default standard output"
    )
    p.add_argument("--max-new-tokens", type=int, help="token budget of each part (default: 16 per second of audio)")
    p.add_argument("--batch", type=int, default=8, help="parts decoded side by side (default 8)")
    p.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda:0")
    add_dtype_flag(p)
    speed_flags(p, compile_flag=False)
    p.set_defaults(func=transcribe)


def _read(path: Path) -> Any:
    from .model.asr.transcriber import heard_wave

    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InvalidInputError(f"cannot read {path}: {exc.strerror or exc}", param="file") from None
    return heard_wave(data, str(path))


def _rendered(result: Any, name: str, form: str) -> str:
    from .model.asr.languages import language_code
    from .service.recognition.subtitles import subtitle_cues, to_srt, to_webvtt

    if form == "text":
        return result.text + "\n"
    if form == "json":
        document = {
            "file": name,
            "language": result.language,
            "language_codes": [language_code(part) for part in result.language.split(",") if part],
            "duration": round(result.seconds, 3),
            "text": result.text,
            "truncated": result.truncated,
        }
        if result.words is not None:
            document["words"] = [{"word": w.text, "start": w.start, "end": w.end} for w in result.words]
        return json.dumps(document, ensure_ascii=False, indent=2) + "\n"
    cues = subtitle_cues(result.text, result.words or [])
    return to_srt(cues) if form == "srt" else to_webvtt(cues)


def transcribe(args: argparse.Namespace) -> int:
    from .cli_progress import transcription_progress
    from .model.asr.languages import resolve_language
    from .model.asr.loading import load_asr_checkpoint
    from .model.asr.transcriber import Transcriber
    from .model.asr.word_split import WordSplitter

    timestamps = args.timestamps or args.format in ("srt", "vtt")
    if timestamps and not args.aligner:
        what = "--timestamps" if args.timestamps else f"--format {args.format}"
        raise InvalidInputError(f"{what} needs word timestamps: pass a ForcedAligner checkpoint with --aligner")
    if args.batch < 1 or (args.max_new_tokens is not None and args.max_new_tokens < 1):
        raise InvalidInputError("--batch and --max-new-tokens are at least 1")
    language = resolve_language(args.language, param="--language")
    splitter = WordSplitter(args.korean_words)
    if timestamps and language:
        splitter.prepare(language)
    _check_output(args.files, args.output)
    waves = [_read(path) for path in args.files]  # every file checked before a model loads
    started = time.perf_counter()
    settings = flag_settings(args)
    precision = flag_precision(settings, args.device)
    model = load_asr_checkpoint(args.model, args.device, precision.dtype, precision.quantize)
    aligner = None  # as `serve` loads a transcriber's: in DTYPE, unquantised unless QUANTIZE says so
    if timestamps:
        dtype, quantize = settings.resolved_dtype(args.device), settings.resolved_quantization()
        aligner = load_asr_checkpoint(args.aligner, args.device, dtype, quantize)
    transcriber = Transcriber(model, aligner, splitter)
    loaded = time.perf_counter()
    with transcription_progress() as progress:
        results = transcriber.transcribe(
            waves,
            [language] * len(waves),
            [args.context] * len(waves),
            timestamps=timestamps,
            max_new_tokens=args.max_new_tokens,
            rows=args.batch,
            progress=progress,
        )
    done = time.perf_counter()
    outputs = [_rendered(result, str(path), args.format) for result, path in zip(results, args.files, strict=True)]
    _write(outputs, args.files, args.output, args.format)
    for result, path in zip(results, args.files, strict=True):
        if result.truncated:
            print(f"warning: {path}: a part spent its token budget before its end (--max-new-tokens)", file=sys.stderr)
    audio = sum(result.seconds for result in results)
    print(
        f"transcribed {audio:.1f} s of audio in {done - loaded:.2f} s ({audio / max(done - loaded, 1e-9):.1f}x real "
        f"time; load {loaded - started:.1f} s)",
        file=sys.stderr,
    )
    return 0


def _check_output(files: list[Path], output: Path | None) -> None:
    if output is None or len(files) == 1:
        return
    if output.exists() and not output.is_dir():
        raise InvalidInputError(f"-o {output}: with several files the output is a directory, and this is a file")
    stems = [path.stem for path in files]
    if len(set(stems)) < len(stems):
        repeated = ", ".join(sorted({stem for stem in stems if stems.count(stem) > 1}))
        raise InvalidInputError(f"several files are named {repeated}: their outputs would overwrite one another")


def _write(outputs: list[str], files: list[Path], output: Path | None, form: str) -> None:
    if output is None:
        if len(outputs) == 1:
            sys.stdout.write(outputs[0])
        elif form == "json":
            sys.stdout.write("[" + ",".join(outputs) + "]\n")
        else:
            sys.stdout.write("".join(f"==> {path} <==\n{text}\n" for path, text in zip(files, outputs, strict=True)))
        return
    if len(outputs) == 1 and not output.is_dir():
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(outputs[0], encoding="utf-8")
        return
    output.mkdir(parents=True, exist_ok=True)
    for path, text in zip(files, outputs, strict=True):
        (output / (path.stem + FORMATS[form])).write_text(text, encoding="utf-8")
