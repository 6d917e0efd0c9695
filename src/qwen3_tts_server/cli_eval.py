"""`qwen3-tts-server eval speech|asr`: quality measured on this machine with the server's own models, several
precisions side by side, written as a report (`eval/`: JSON, Markdown and a plot)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import InvalidInputError

if TYPE_CHECKING:
    from .eval.report import Row
    from .eval.speech import Clone, Configuration

EXTRA = "the eval command needs the `eval` extra: pip install 'qwen3-tts-server[eval]'"


def add_eval(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "eval",
        help="measure quality on this machine: round-trip error rate of speech, error rate of recognition",
        description="Measure quality with the server's own models, each precision side by side: `speech` speaks a "
        "fixed set of sentences and has a Qwen3-ASR transcribe them back (word or character error rate), `asr` "
        "transcribes a folder of recordings with their texts, or a dataset's. Writes report.json, report.md and "
        "report.png.",
    )
    kinds = p.add_subparsers(dest="eval_kind", required=True)
    speech = kinds.add_parser("speech", help="round-trip error rate (and a clone's similarity) of a speech model")
    speech.add_argument("--model", required=True, help="speech checkpoint directory or hub id")
    speech.add_argument("--asr", required=True, help="Qwen3-ASR checkpoint that transcribes (Qwen/Qwen3-ASR-1.7B)")
    speech.add_argument("--speaker", help="preset speaker of a CustomVoice model (default: its first)")
    speech.add_argument("--instruct", help="a VoiceDesign model's voice description (a style for a 1.7B CustomVoice)")
    speech.add_argument("--languages", help="ISO codes, comma-separated (default: all ten)")
    speech.add_argument("--per-language", type=int, help="the first N sentences of each language (default: all)")
    speech.add_argument("--seed", type=int, default=0, help="the first sentence's seed; the n-th has seed + n")
    clone = speech.add_argument_group("a clone (Base models): its similarity to the reference, and its error rate")
    clone.add_argument("--ref-audio", type=Path, help="the recording to clone (wav, flac, mp3, ...)")
    clone.add_argument("--ref-text", help="its transcript (in-context cloning, the default)")
    clone.add_argument("--x-vector-only", action="store_true", help="clone from the speaker embedding alone")
    clone.add_argument(
        "--ref-from",
        metavar="CUSTOMVOICE_MODEL",
        help="instead of --ref-audio, the set's own reference: its reference sentence said by --speaker (default: "
        "the first) of this CustomVoice checkpoint, cloned by --model",
    )
    _add_common(speech)
    speech.set_defaults(func=_speech)
    asr = kinds.add_parser("asr", help="error rate of a Qwen3-ASR on your recordings")
    asr.add_argument("--model", required=True, help="Qwen3-ASR checkpoint directory or hub id")
    source = asr.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", type=Path, help="a folder of recordings, each with its text in NAME.txt beside it")
    source.add_argument(
        "--dataset",
        help="a `datasets` dataset, streamed: a hub id (openslr/librispeech_asr, google/fleurs, ...) or a local "
        "dataset folder",
    )
    asr.add_argument("--language", required=True, help="the recordings' language, an ISO code (en, zh, ...)")
    asr.add_argument("--limit", type=int, help="the first N recordings (default: all)")
    rows = asr.add_argument_group("a dataset's rows")
    rows.add_argument("--dataset-config", help="its configuration (clean, en_us, ...; default: its default)")
    rows.add_argument("--split", default="test", help="its split (default: test)")
    rows.add_argument(
        "--dataset-revision", help="a hub dataset's branch, tag or commit, to score the same rows again (default: main)"
    )
    rows.add_argument("--audio-column", default="audio", help="the column of audio (default: audio)")
    rows.add_argument(
        "--text-column", help="the column of transcripts (default: the first of text, sentence, transcription, ...)"
    )
    _add_common(asr)
    asr.set_defaults(func=_asr)


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--precision",
        action="append",
        help="a configuration: default (the server's own here), DTYPE, or DTYPE:QUANTIZE (float32, bfloat16, "
        "bfloat16:int8, float32:int4, bfloat16:w8a8, ...); repeat for several, side by side (default: default)",
    )
    p.add_argument("--asr-precision", default="default", help="the transcriber's, in the same form (default: default)")
    p.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda:0")
    p.add_argument("-o", "--output", type=Path, default=Path("eval-report"), help="report folder (default eval-report)")


def _speech(args: argparse.Namespace) -> int:
    try:
        from .eval.sentences import sentence_set
        from .eval.speech import configuration, evaluate
    except ImportError as exc:
        raise InvalidInputError(f"{EXTRA} ({exc.name} is missing)") from None
    if args.per_language is not None and args.per_language < 1:
        raise InvalidInputError("--per-language is at least 1", param="per_language")
    languages = [code.strip() for code in args.languages.split(",")] if args.languages else None
    chosen = sentence_set(languages, args.per_language)
    setups = _setups(args)
    heard_by = configuration(args.asr_precision, args.device)
    clone = _clone(args)
    speaker = None if args.ref_from else args.speaker  # (then the reference's speaker, not the evaluated model's)
    rows = evaluate(
        args.model, args.asr, setups, chosen.sentences, speaker, args.seed, heard_by, _said, clone, args.instruct
    )
    context = {
        "sentence set": f"version {chosen.version}, {len(chosen.sentences)} sentences",
        "transcriber": f"{args.asr} ({heard_by.label}: {heard_by.dtype}, {heard_by.quantize or 'no'} quantisation)",
        "seed": args.seed,
    }
    if clone is not None:
        context["clone of"] = str(args.ref_audio or f"the set's reference sentence, said by {args.ref_from}")
    plotted = "speaker_similarity" if clone is not None else "real_time_factor"
    return _written(args, "speech", "Round-trip error rate of speech", rows, context, plotted)


def _clone(args: argparse.Namespace) -> Clone | None:
    """The voice to clone, if --ref-audio names one or --ref-from makes the set's own."""
    from .audio.reference import load_reference
    from .eval.speech import Clone, preset_reference

    if args.ref_from is not None:
        if args.ref_audio is not None or args.ref_text:
            raise InvalidInputError("give --ref-from or --ref-audio (with --ref-text), not both", param="ref_from")
        _said(f"making the set's own reference with {args.ref_from}")
        return preset_reference(args.ref_from, args.speaker, args.device, args.seed)
    if args.ref_audio is None:
        if args.ref_text or args.x_vector_only:
            raise InvalidInputError("--ref-text and --x-vector-only go with --ref-audio", param="ref_audio")
        return None

    try:
        data = args.ref_audio.read_bytes()
    except OSError as exc:
        raise InvalidInputError(f"cannot read --ref-audio {args.ref_audio}: {exc.strerror or exc}") from None
    return Clone(load_reference(data), args.ref_text, args.x_vector_only)


def _asr(args: argparse.Namespace) -> int:
    try:
        from .eval.asr import evaluate_asr, recordings
        from .eval.hub_dataset import DatasetSource, dataset_recordings
    except ImportError as exc:
        raise InvalidInputError(f"{EXTRA} ({exc.name} is missing)") from None
    if args.limit is not None and args.limit < 1:
        raise InvalidInputError("--limit is at least 1", param="limit")
    if args.data is not None:
        recorded = recordings(args.data, args.language, args.limit)
        origin = str(args.data)
    else:
        source = DatasetSource(
            args.dataset, args.dataset_config, args.split, args.audio_column, args.text_column, args.dataset_revision
        )
        recorded = dataset_recordings(source, args.language, args.limit, _said)
        origin = source.described
    rows = evaluate_asr(args.model, _setups(args), recorded, args.language, _said)
    context = {
        "recordings": f"{len(recorded)} from {origin}, {args.language}",
    }
    return _written(args, "asr", "Error rate of recognition", rows, context, "real_time_factor")


def _setups(args: argparse.Namespace) -> list[Configuration]:
    """The configurations --precision names, each once, in order (default: the server's own)."""
    from .eval.speech import configuration

    return [configuration(spec, args.device) for spec in dict.fromkeys(args.precision or ["default"])]


def _written(
    args: argparse.Namespace, kind: str, title: str, rows: list[Row], context: dict[str, Any], plotted: str
) -> int:
    from .eval.report import write

    command = " ".join(["qwen3-tts-server", *args.argv])
    written = write(args.output, kind, title, rows, {"command": command, **context}, plotted)
    print((args.output / "report.md").read_text(encoding="utf-8"))
    _said("wrote " + ", ".join(str(path) for path in written))
    return 0


def _said(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
