"""The `qwen3-tts-server` command: `serve`, `gateway`, `wyoming`, `ray-serve`, `config`, `healthcheck`, `synth` (text
to a WAV file), `transcribe` (audio files to text: `cli_transcribe.py`), `make-test-model`, `make-preset-voices`,
`bench` and `bench-serving`."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from . import __version__
from .cli_eval import add_eval
from .cli_precision import add_dtype_flag, flag_precision, flag_settings
from .cli_transcribe import add_transcribe
from .errors import InvalidInputError, TTSError

SYNTH_BATCH = 16  # segments generated together by `synth`
WYOMING_DEFAULT_PORT = 10200  # the port Home Assistant's Wyoming integration suggests


def _add_synth(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("synth", help="synthesize text to a WAV file", description="Synthesize text to a WAV file.")
    p.add_argument(
        "--model",
        action="append",
        required=True,
        help="checkpoint directory or hub id (e.g. Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice); repeated, the one the voice "
        "asks for speaks, chosen as the server chooses (docs/models.md)",
    )
    text = p.add_mutually_exclusive_group(required=True)
    text.add_argument("--text", help="text to speak")
    text.add_argument("--text-file", type=Path, help="UTF-8 file holding the text to speak")
    p.add_argument("--speaker", help="preset speaker (CustomVoice models), e.g. Vivian")
    p.add_argument("--language", default="auto", help="language name or auto (default)")
    p.add_argument("--instruct", help="style instruction; the voice description for VoiceDesign models")
    clone = p.add_argument_group("voice cloning (Base models)")
    clone.add_argument("--ref-audio", type=Path, help="reference recording to clone (wav, flac, mp3, ogg, m4a, webm)")
    clone.add_argument("--ref-text", help="transcript of the reference (needed for in-context cloning, the default)")
    clone.add_argument("--x-vector-only", action="store_true", help="clone from the speaker embedding alone")
    clone.add_argument(
        "--ref-tail-silence-ms", type=int, default=0, help="silence appended to the reference (default 0)"
    )
    clone.add_argument("--voice-prompt", type=Path, help="reuse a voice prompt saved with --save-voice-prompt")
    clone.add_argument("--save-voice-prompt", type=Path, help="save the cloned voice (PATH.safetensors + PATH.json)")
    p.add_argument(
        "--normalize",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="read numbers, dates, symbols... as words (default on)",
    )
    p.add_argument("--seed", type=int, help="seed for reproducible sampling")
    p.add_argument("--greedy", action="store_true", help="argmax decoding for the talker and the code predictor")
    p.add_argument("--temperature", type=float)
    p.add_argument("--top-k", type=int)
    p.add_argument("--top-p", type=float)
    p.add_argument("--repetition-penalty", type=float)
    p.add_argument("--max-frames", type=int, help="frame budget (80 ms each); default grows with the text")
    p.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda:0")
    add_dtype_flag(p)
    _add_speed_flags(p)
    p.add_argument("-o", "--output", type=Path, default=Path("out.wav"), help="output WAV (default out.wav)")
    p.add_argument("--codes-out", type=Path, help="also save the codec codes, int array (frames, 16), as .npy")
    p.add_argument(
        "--subtitles",
        action="append",
        choices=["srt", "vtt"],
        help="also write subtitles beside the WAV (OUTPUT.srt, OUTPUT.vtt; repeat for both), their words timed in "
        "the audio by --aligner",
    )
    p.add_argument("--aligner", help="Qwen3-ForcedAligner checkpoint directory or hub id, for --subtitles")
    p.set_defaults(func=_synth)


def _write_subtitles(args: argparse.Namespace, text: str, spoken: list, segments: list, rate: int) -> None:
    """SubRip and WebVTT files of the text beside the WAV, its words timed in each segment's audio."""
    from .engine.recognition import load_forced_aligner
    from .service.recognition.subtitles import subtitle_cues, to_srt, to_webvtt
    from .service.speech.alignment import segment_words

    settings = flag_settings(args)
    aligner = load_forced_aligner(args.aligner, args.device, settings.resolved_dtype(args.device), None, None)
    words, offset = [], 0.0
    for segment, audio in zip(spoken, segments, strict=True):
        words += segment_words(aligner, segment, audio, rate, offset)
        offset += len(audio) / rate
    cues = subtitle_cues(text, words, duration=offset)
    for kind in dict.fromkeys(args.subtitles):
        path = args.output.with_suffix(f".{kind}")
        path.write_text(to_srt(cues) if kind == "srt" else to_webvtt(cues), encoding="utf-8")
        print(f"wrote {path}: {len(cues)} cues", file=sys.stderr)


def _synth(args: argparse.Namespace) -> int:
    import numpy as np
    import soundfile as sf
    from tqdm import tqdm

    from .model.tts.tts_model import Qwen3TTSModel
    from .service.speech.preparation import decoded, prepare_text
    from .service.speech.requests import SamplingOverrides

    if args.text_file is not None:
        try:
            text = args.text_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidInputError(f"cannot read --text-file {args.text_file}: {exc}") from exc
    else:
        text = args.text
    if args.subtitles and not args.aligner:
        raise InvalidInputError("--subtitles needs --aligner (Qwen/Qwen3-ForcedAligner-0.6B)", param="aligner")
    started = time.perf_counter()
    precision = flag_precision(flag_settings(args), args.device)
    model = Qwen3TTSModel.load(
        _routed_checkpoint(args),
        device=args.device,
        dtype=precision.dtype,
        quantize=precision.quantize,
        compile=args.compile,
    )
    loaded = time.perf_counter()
    overrides = SamplingOverrides(args.temperature, args.top_k, args.top_p, args.repetition_penalty, args.seed)
    params = overrides.params(model)
    if args.greedy:
        params = params.greedy()
    voice = _voice(args, model)
    spec = model.prompts.check_voice(args.speaker, args.instruct, voice)
    prepared = prepare_text(model, spec, text, args.language, args.normalize, params)
    results = []
    with tqdm(unit="frame", desc="generating", file=sys.stderr, leave=False, disable=None) as bar:
        for start in range(0, len(prepared.inputs), SYNTH_BATCH):  # segments in batches: bounded memory for long text
            batch = slice(start, start + SYNTH_BATCH)

            def progress(done: int, budget: int, before: int = bar.n) -> None:
                bar.total = before + budget
                bar.update(before + done - bar.n)

            results += model.generate(
                prepared.inputs[batch], prepared.params[batch], max_frames=args.max_frames, on_frames=progress
            )
    generated = time.perf_counter()
    segments = decoded(model, results, voice.ref_codes if voice is not None else None)
    audio = np.concatenate(segments)
    done = time.perf_counter()
    args.output.parent.mkdir(parents=True, exist_ok=True)
    sf.write(args.output, audio, model.sample_rate, subtype="PCM_16")
    if args.subtitles:
        _write_subtitles(args, text, prepared.segments, segments, model.sample_rate)
    codes = np.concatenate([result.codes for result in results])
    if args.codes_out is not None:
        args.codes_out.parent.mkdir(parents=True, exist_ok=True)
        np.save(args.codes_out, codes)
    frames = len(codes)
    seconds = model.frames_to_seconds(frames)
    pieces = f", {len(results)} segments" if len(results) > 1 else ""
    print(
        f"wrote {args.output}: {seconds:.2f} s of audio ({frames} frames{pieces}) at {model.sample_rate} Hz; "
        f"load {loaded - started:.2f} s, generate {generated - loaded:.2f} s, decode {done - generated:.2f} s",
        file=sys.stderr,
    )
    for index, result in enumerate(results):
        if result.finish_reason == "length":
            which = f"segment {index + 1} of {len(results)} " if len(results) > 1 else ""
            print(
                f"warning: {which}stopped at the frame budget ({len(result.codes)} frames) before the model ended "
                "the speech; raise --max-frames to let it finish",
                file=sys.stderr,
            )
    return 0


def _routed_checkpoint(args: argparse.Namespace) -> str:
    """The checkpoint of the --model options that speaks the voice asked for: a preset --speaker a CustomVoice
    model, --ref-audio or --voice-prompt a Base model, --instruct alone a VoiceDesign model (`routing.route`)."""
    if len(args.model) == 1:
        return args.model[0]
    from functools import partial

    from .config import model_id_of
    from .engine.model_manager import ModelManager
    from .engine.registry import HostedModel, ModelRegistry
    from .model.checkpoint import resolve_checkpoint
    from .model.tts.loading import prepare_loading
    from .service.speech.routing import route

    hosted = [
        HostedModel(model_id_of(source), source, ModelManager(lambda: None, describe=partial(prepare_loading, source)))
        for source in args.model
    ]
    for entry in hosted:
        entry.directory = resolve_checkpoint(entry.source)
    registry = ModelRegistry(hosted)
    registry.prepare()
    clone = args.ref_audio is not None or args.voice_prompt is not None
    chosen = route(registry, None, None, args.speaker or "", args.instruct, inline_clone=clone)
    print(f"speaking with {chosen.source}", file=sys.stderr)
    return chosen.source


def _voice(args: argparse.Namespace, model):
    """The cloned voice asked for on the command line, if any."""
    from .audio.reference import load_reference
    from .model.tts.voice_prompt import VoicePrompt

    if args.voice_prompt is not None:
        if args.ref_audio is not None:
            raise InvalidInputError("give either --voice-prompt or --ref-audio, not both")
        return VoicePrompt.load(args.voice_prompt)
    if args.ref_audio is None:
        if args.ref_text or args.x_vector_only or args.save_voice_prompt:
            raise InvalidInputError("--ref-text, --x-vector-only and --save-voice-prompt go with --ref-audio")
        return None
    try:
        data = args.ref_audio.read_bytes()
    except OSError as exc:
        raise InvalidInputError(f"cannot read --ref-audio {args.ref_audio}: {exc}") from exc
    started = time.perf_counter()
    voice = model.voice_encoder.encode(
        load_reference(data, args.ref_tail_silence_ms), args.ref_text, x_vector_only=args.x_vector_only
    )
    print(f"cloned voice {voice.id} ({voice.mode}) in {time.perf_counter() - started:.2f} s", file=sys.stderr)
    if args.save_voice_prompt is not None:
        args.save_voice_prompt.parent.mkdir(parents=True, exist_ok=True)
        voice.save(args.save_voice_prompt)
    return voice


def _add_make_preset_voices(sub: argparse._SubParsersAction) -> None:
    from .config import add_flags

    p = sub.add_parser(
        "make-preset-voices",
        help="make the preset voices (vivian, Uncle Fu, alloy...) for a Base model from a CustomVoice one",
        description="Have each preset speaker of a CustomVoice checkpoint say a fixed text (seeded) and clone it "
        "with the Base checkpoint (MODEL_ID) into the voice library (DATA_DIR) under the speaker's name: a Base "
        "server then speaks the preset names and their OpenAI aliases. Made again, each voice is replaced.",
    )
    p.add_argument("--from", dest="custom_voice", required=True, help="the CustomVoice checkpoint: directory or hub id")
    p.add_argument("--seed", type=int, default=0, help="sampling seed of the recordings (default 0)")
    p.add_argument(
        "--mode",
        choices=["x_vector", "in_context"],
        default="x_vector",
        help="x_vector (default: the speaker embedding, as the earlier server's) or in_context (with the recording)",
    )
    p.add_argument("--max-frames", type=int, help="each recording's frame budget (default 250: 20 s)")
    add_flags(p, ["model_id", "data_dir", "device", "dtype"])
    p.set_defaults(func=_make_preset_voices)


def _make_preset_voices(args: argparse.Namespace) -> int:
    from .config import from_args
    from .model.tts.tts_model import Qwen3TTSModel
    from .service.speech.preset_voices import MAX_REFERENCE_FRAMES, make_preset_voices
    from .service.speech.voice_library import PromptCache, VoiceLibrary, default_data_dir

    settings = from_args(args)
    device = settings.resolved_device()
    dtype = settings.resolved_dtype(device)
    base = Qwen3TTSModel.load(settings.model_id, device=device, dtype=dtype)
    custom_voice = Qwen3TTSModel.load(args.custom_voice, device=device, dtype=dtype)
    library = VoiceLibrary(settings.data_dir or default_data_dir(), PromptCache(0))
    frames = args.max_frames or MAX_REFERENCE_FRAMES
    made = make_preset_voices(
        custom_voice, base, library, args.seed, args.mode, frames, lambda line: print(line, file=sys.stderr)
    )
    print(f"made {len(made)} preset voices in {library.root}", file=sys.stderr)
    return 0


def _add_make_test_model(sub: argparse._SubParsersAction) -> None:
    from .testing.random_asr_checkpoint import ASR_SIZES, ASR_TYPES
    from .testing.random_checkpoint import SIZES, TYPES

    p = sub.add_parser(
        "make-test-model",
        help="write a random-weight checkpoint in the official format",
        description="Write a random-weight Qwen3-TTS, Qwen3-ASR or Qwen3-ForcedAligner checkpoint in the official "
        "on-disk format.",
    )
    p.add_argument("directory", type=Path)
    p.add_argument("--size", choices=tuple(dict.fromkeys(SIZES + ASR_SIZES)), default="tiny")
    p.add_argument("--type", dest="model_type", choices=TYPES + ASR_TYPES, default="custom_voice")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_make_test_model)


def _make_test_model(args: argparse.Namespace) -> int:
    from .testing.random_asr_checkpoint import ASR_TYPES, make_asr_test_model
    from .testing.random_checkpoint import make_test_model

    started = time.perf_counter()
    make = make_asr_test_model if args.model_type in ASR_TYPES else make_test_model
    try:
        path = make(args.directory, args.size, args.model_type, args.seed)
    except ValueError as exc:  # a size that type does not come in
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(
        f"wrote {args.size} {args.model_type} checkpoint to {path} in {time.perf_counter() - started:.1f} s",
        file=sys.stderr,
    )
    return 0


def _add_bench(sub: argparse._SubParsersAction) -> None:
    from .testing.random_checkpoint import SIZES

    p = sub.add_parser(
        "bench",
        help="engine benchmark: concurrent streams, TTFA and throughput",
        description="Stream concurrent requests through the engine (EOS suppressed, equal frames) and report "
        "time to first audio, per-stream and aggregate speed; writes JSON and a PNG plot.",
    )
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="checkpoint directory or hub id")
    source.add_argument("--size", choices=SIZES, help="build a random-weight test checkpoint of this size")
    p.add_argument("--type", dest="model_type", default="custom_voice", help="model type for --size")
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    p.add_argument("--frames", type=int, default=64, help="frames per stream (80 ms each)")
    p.add_argument("--device", default="cpu")
    add_dtype_flag(p)
    _add_speed_flags(p)
    p.add_argument("--out", type=Path, default=Path("bench.json"), help="JSON results (default bench.json)")
    p.add_argument("--plot", type=Path, help="PNG plot (default: beside --out)")
    p.add_argument(
        "--peer",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="also time a peer (official or faster) on the same checkpoint and frames, one request at a time; "
        "PATH: a Python interpreter that has the peer's packages, or a folder of them (pip install --target)",
    )
    p.add_argument("--peer-runs", type=int, default=3, help="timed requests per peer (default 3)")
    p.add_argument(
        "--cuda-graphs",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="replay the frame step as CUDA graphs on a GPU (default on); as CUDA_GRAPHS for serve",
    )
    p.add_argument(
        "--fused-kernels",
        choices=("auto", "off"),
        default="auto",
        help="the code predictor's fused Triton kernels where they can run (auto), or the layer-by-layer passes (off); "
        "as FUSED_KERNELS for serve",
    )
    p.add_argument(
        "--traced-predictor",
        choices=("auto", "off"),
        default="auto",
        help="on a CPU, the code predictor's passes as a TorchScript trace (auto), or layer by layer (off); as "
        "TRACED_PREDICTOR for serve",
    )
    p.set_defaults(func=_bench)


def _bench(args: argparse.Namespace) -> int:
    import json
    import tempfile

    import torch

    from .bench.peers import PEERS, measure_peer
    from .bench.streams import run_bench, write_results
    from .engine.model_manager import ModelManager, warm_up_model
    from .model.tts.tts_model import Qwen3TTSModel
    from .testing.random_checkpoint import make_test_model

    if min(args.concurrency) < 1 or args.frames < 1 or args.peer_runs < 1:
        raise InvalidInputError("--concurrency values, --frames and --peer-runs must be >= 1")
    peers = [spec.partition("=")[::2] for spec in args.peer]
    for name, path in peers:
        if name not in PEERS or not path:
            raise InvalidInputError(f"--peer {name}={path}: give NAME=PATH with NAME one of {', '.join(PEERS)}")
        if not Path(path).exists():
            raise InvalidInputError(f"--peer {name}={path}: no such interpreter or folder")
    if peers and args.model_type != "custom_voice":
        raise InvalidInputError("--peer times CustomVoice requests: use a CustomVoice checkpoint (--type custom_voice)")
    precision = flag_precision(flag_settings(args), args.device)
    with tempfile.TemporaryDirectory() as tmp:
        source = args.model or make_test_model(Path(tmp) / "model", args.size, args.model_type, seed=0)
        # Loaded and warmed up (which compiles the step with --compile) on a thread that ends when done, as `serve`
        # does: a thread that did parallel torch work and lives on slows the engine's (engine/placement.py).
        started = time.perf_counter()
        timings: dict[str, float] = {}

        def load() -> Qwen3TTSModel:
            loaded = Qwen3TTSModel.load(
                source,
                device=args.device,
                dtype=precision.dtype,
                quantize=precision.quantize,
                compile=args.compile,
                trace_predictor=args.traced_predictor == "auto",
            )
            timings["loaded"] = time.perf_counter()
            return loaded

        model = ModelManager(load, warmup=warm_up_model).get()
        ready = time.perf_counter()
        loaded = timings["loaded"]
        name = args.model or f"make-test-model --size {args.size} --type {args.model_type}"
        print(f"benchmarking {name}: {args.frames} frames per stream at {args.concurrency}", file=sys.stderr)
        rss_ready = _resident_mib()
        results, states = run_bench(
            model, args.concurrency, args.frames, cuda_graphs=args.cuda_graphs, fused_kernels=args.fused_kernels
        )
        for row in results:
            print(json.dumps(row.__dict__), flush=True)
        peer_results, failures = [], {}
        for peer, path in peers:
            print(f"timing {peer} ({path}): {args.peer_runs} requests of {args.frames} frames", file=sys.stderr)
            try:
                measured = measure_peer(
                    peer,
                    path,
                    model.directory,
                    model.speakers[0],
                    args.frames,
                    model.frames_to_seconds(args.frames),
                    args.peer_runs,
                    args.device,
                    precision.dtype,
                )
            except TTSError as exc:  # our figures are kept: the report is written without this peer
                print(f"error: {exc}", file=sys.stderr)
                failures[peer] = str(exc)[-2000:]
                continue
            print(json.dumps(measured.__dict__), flush=True)
            peer_results.append(measured)
    meta = {
        "model": name,
        "device": args.device,
        "dtype": precision.dtype,
        "quantize": model.quantization_state,
        "precision": precision.why,
        **states,  # cuda_graphs, fused_kernels, traced_predictor
        "compiled": model.compiler is not None and model.compiler.enabled,
        "threads": torch.get_num_threads(),
        "load_seconds": round(loaded - started, 2),
        "ready_seconds": round(ready - started, 2),  # with the warm-up, which compiles the step
        "rss_mib_ready": rss_ready,
        "rss_mib_after": _resident_mib(),
    }
    if failures:
        meta["peer_failures"] = failures
    if args.device.startswith("cuda"):
        meta["gpu"] = torch.cuda.get_device_name(args.device)
        meta["gpu_memory_gib"] = round(torch.cuda.max_memory_allocated(args.device) / 2**30, 2)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        plot = None
        print("no plot: matplotlib is missing (pip install 'qwen3-tts-server[bench]')", file=sys.stderr)
    else:
        plot = args.plot or args.out.with_suffix(".png")
    write_results(results, meta, args.out, plot, peer_results)
    print(f"wrote {args.out}" + (f" and {plot}" if plot else ""), file=sys.stderr)
    return 1 if failures else 0


def _add_bench_serving(sub: argparse._SubParsersAction) -> None:
    from .bench.serving import POLICIES, SAMPLE_RATE
    from .testing.random_checkpoint import SIZES

    p = sub.add_parser(
        "bench-serving",
        help="serving benchmark: open-loop arrivals over HTTP, first audio and underruns",
        description="Start a server per scheduling policy (or measure one at --url), send streamed PCM requests as "
        "Poisson arrivals at each rate, then a burst at once, and report time to first audio, the underruns a "
        "player would hear and the highest rate held; writes JSON and a PNG plot.",
    )
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="checkpoint directory or hub id")
    source.add_argument("--size", choices=SIZES, help="build a random-weight test checkpoint of this size")
    source.add_argument("--url", help="a running server's base URL, measured as it runs (policy `url`)")
    p.add_argument("--type", dest="model_type", default="custom_voice", help="model type for --size")
    p.add_argument("--device", default="cpu", help="the servers' DEVICE")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"], help="their DTYPE")
    p.add_argument(
        "--policies",
        nargs="+",
        choices=list(POLICIES),
        default=list(POLICIES),
        help="; ".join(f"{name}: {' '.join(f'{k}={v}' for k, v in env.items())}" for name, env in POLICIES.items()),
    )
    p.add_argument("--rates", type=float, nargs="+", default=[1.0, 2.0, 4.0], help="arrivals per second")
    p.add_argument("--duration", type=float, default=20.0, help="seconds of arrivals per rate (default 20)")
    p.add_argument("--burst", type=int, default=16, help="requests sent at once after the rates (0: none)")
    p.add_argument("--burst-rounds", type=int, default=1, help="bursts, one after another, summarised together")
    p.add_argument("--max-frames", type=int, default=100, help="the servers' MAX_REQUEST_FRAMES (80 ms each)")
    p.add_argument("--language", help="the requests' language (default: the server detects it, as OpenAI's clients)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ttfa-goal-ms", type=float, default=100.0, help="p95 first audio a rate held must meet")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds a request may take (default 120)")
    p.add_argument("--sample-rate", type=int, default=SAMPLE_RATE, help="the raw PCM's rate (the model's)")
    p.add_argument("--out", type=Path, default=Path("bench_serving.json"), help="JSON results")
    p.add_argument("--plot", type=Path, help="PNG plot (default: beside --out)")
    p.add_argument("--requests", type=Path, help="also write every request's timings and chunks here (JSON)")
    p.set_defaults(func=_bench_serving)


def _bench_serving(args: argparse.Namespace) -> int:
    import asyncio
    import json
    import tempfile
    from contextlib import ExitStack
    from dataclasses import asdict

    from .bench.serving import (
        POLICIES,
        SERVING_ENVIRONMENT,
        Level,
        Plan,
        PolicyRun,
        build_report,
        requests_report,
        run_policy,
        table,
        write_report,
    )
    from .testing.live_server import live_process
    from .testing.random_checkpoint import make_test_model

    if min(args.rates) <= 0 or args.duration <= 0 or args.timeout <= 0 or args.burst < 0:
        raise InvalidInputError("--rates, --duration and --timeout must be > 0 and --burst >= 0")
    if args.max_frames < 1 or args.burst_rounds < 1:
        raise InvalidInputError("--max-frames and --burst-rounds must be >= 1")
    rounds = args.burst_rounds
    plan = Plan(
        tuple(args.rates), args.duration, args.burst, args.seed, args.sample_rate, args.timeout, rounds, args.language
    )

    def measure(base: str, policy: str) -> PolicyRun:
        def report(level: Level) -> None:
            print(json.dumps(asdict(level)), flush=True)

        return asyncio.run(run_policy(base, policy, plan, report))

    results: list[PolicyRun] = []
    failures: dict[str, str] = {}  # policy: why its server did not start
    if args.url:
        name, policies = args.url, {"url": None}
        results.append(measure(args.url, "url"))
    else:
        name = args.model or f"make-test-model --size {args.size} --type {args.model_type}"
        policies = {policy: POLICIES[policy] for policy in args.policies}
        server_env = {"MAX_REQUEST_FRAMES": str(args.max_frames), "DEVICE": args.device, "DTYPE": args.dtype}
        with tempfile.TemporaryDirectory() as tmp:
            model = args.model or make_test_model(Path(tmp) / "model", args.size, args.model_type, seed=0)
            for policy, env in policies.items():
                print(f"{policy}: a server with {env | server_env}", file=sys.stderr)
                with ExitStack() as stack:
                    try:
                        server = live_process("serve", model, "--preload-model", env=env | server_env, ready_within=600)
                        live = stack.enter_context(server)
                    except (RuntimeError, TimeoutError) as exc:  # it exited or never got ready (a setting it refuses)
                        print(f"error: {policy}: {exc}", file=sys.stderr)
                        failures[policy] = str(exc)[-2000:]
                        continue
                    results.append(measure(live.base, policy))
    meta = {
        "model": name,
        "policies": policies,
        "rates": args.rates,
        "duration": args.duration,
        "burst": args.burst,
        "burst_rounds": args.burst_rounds,
        "language": args.language,
        "max_frames": None if args.url else args.max_frames,
        "seed": args.seed,
        "timeout": args.timeout,
        "sample_rate": args.sample_rate,
        "client_cpus": os.cpu_count(),
        # what the servers inherit that shapes their speed (the engine's cores, torch's threads)
        "environment": {key: os.environ[key] for key in SERVING_ENVIRONMENT if key in os.environ},
    }
    if failures:
        meta["failures"] = failures
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        plot = None
        print("no plot: matplotlib is missing (pip install 'qwen3-tts-server[bench]')", file=sys.stderr)
    else:
        plot = args.plot or args.out.with_suffix(".png")
    report = build_report(results, meta, args.ttfa_goal_ms)
    write_report(report, args.out, plot)
    if args.requests:
        args.requests.write_text(json.dumps(requests_report(results)) + "\n")
    print(table(report), file=sys.stderr)
    print(f"wrote {args.out}" + (f" and {plot}" if plot else ""), file=sys.stderr)
    return 1 if failures else 0


def _add_speed_flags(p: argparse.ArgumentParser, compile_flag: bool = True) -> None:
    p.add_argument(
        "--quantize",
        choices=["auto", "none", "int8", "int4", "fp8", "w8a8"],
        help="quantisation of the decoder layers (fp8: CUDA only; w8a8: CPU only), as QUANTIZE for serve (default: "
        "QUANTIZE, else auto: w8a8 on a CPU)",
    )
    if not compile_flag:
        return
    p.add_argument(
        "--compile",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="compile the frame step (torch.compile) before generating; as TORCH_COMPILE for serve",
    )


def _resident_mib() -> float | None:
    from .resources import resident_memory_bytes

    rss = resident_memory_bytes()
    return None if rss is None else round(rss / 2**20, 1)


def _add_serve(sub: argparse._SubParsersAction) -> None:
    from .config import add_flags

    p = sub.add_parser(
        "serve",
        help="run the OpenAI-compatible HTTP server",
        description="Run the OpenAI-compatible speech server (POST /v1/audio/speech, ...). Every flag has an "
        "environment variable (also read from ./.env); `qwen3-tts-server config` shows the effective values.",
    )
    add_flags(p)
    p.set_defaults(func=_serve)


def _serve(args: argparse.Namespace) -> int:
    from .config import from_args

    settings = from_args(args)
    if settings.gateway_mode:  # the light gateway replaces this process: nothing heavy imported yet
        os.execv(sys.executable, [sys.executable, "-m", "qwen3_tts_server", "gateway", *args.argv[1:]])
    from .server import serve

    return serve(settings)


def _add_wyoming(sub: argparse._SubParsersAction) -> None:
    from .config import add_flags

    p = sub.add_parser(
        "wyoming",
        help="run only the Wyoming server (Home Assistant), on WYOMING_PORT (default 10200)",
        description="Run the Wyoming protocol server alone, without the HTTP API: the same settings as `serve`, "
        f"WYOMING_PORT defaulting to {WYOMING_DEFAULT_PORT}. No API key applies to it: keep it on the local "
        "network. SIGTERM or Ctrl-C stops it.",
    )
    add_flags(p)
    p.set_defaults(func=_wyoming)


def _wyoming(args: argparse.Namespace) -> int:
    from .config import from_args
    from .server import serve_wyoming

    settings = from_args(args)
    if settings.wyoming_port is None:
        settings = settings.model_copy(update={"wyoming_port": WYOMING_DEFAULT_PORT})
    return serve_wyoming(settings)


def _add_config(sub: argparse._SubParsersAction) -> None:
    from .config import add_flags

    p = sub.add_parser(
        "config",
        help="print the effective settings",
        description="Print the settings `serve` would use (environment, ./.env, then these flags), the API key "
        "masked, and fail naming the variable when a value is invalid.",
    )
    p.add_argument("--json", action="store_true", help="one JSON object instead of NAME=value lines")
    p.add_argument("--show-secrets", action="store_true", help=argparse.SUPPRESS)  # the gateway reads the key
    add_flags(p)
    p.set_defaults(func=_config)


def _config(args: argparse.Namespace) -> int:
    import json

    from .config import from_args, model_id_of, unsupported_variable_warnings

    settings = from_args(args)
    for warning in unsupported_variable_warnings():
        print(f"warning: {warning}", file=sys.stderr)
    values = settings.effective()
    if args.show_secrets:
        if settings.api_key is not None:
            values["API_KEY"] = settings.api_key.get_secret_value()
        values["API_KEYS"] = [key.get_secret_value() for key in settings.api_keys]
    if args.json:
        print(json.dumps(values))
    else:
        for name, value in values.items():
            print(f"{name}={'' if value is None else value}")
        for source in settings.hosted_models():  # MODELS, or MODEL_ID alone
            print(f"# hosted: {model_id_of(source)} from {source}")
    return 0


def _add_healthcheck(sub: argparse._SubParsersAction) -> None:
    from .config import add_flags

    p = sub.add_parser(
        "healthcheck",
        help="exit 0 when the local server answers GET /ready, 1 when not (container health checks)",
        description="GET /ready on the server these settings describe (its Unix socket, or HOST:PORT with a "
        "wildcard host probed on the loopback; over HTTPS when SSL_CERTFILE is set, the certificate not verified); "
        "prints the reason, exits 0 when ready and 1 when not.",
    )
    p.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for the answer (default 5)")
    add_flags(p, ["host", "port", "unix_socket_path", "ssl_keyfile", "ssl_certfile"])
    p.set_defaults(func=_healthcheck)


def _healthcheck(args: argparse.Namespace) -> int:
    from .config import from_args
    from .probe import check_ready

    settings = from_args(args)
    tls = settings.ssl_certfile is not None
    ok, reason = check_ready(settings.host, settings.port, settings.unix_socket_path, args.timeout, tls)
    print(reason)
    return 0 if ok else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="qwen3-tts-server",
        description="Qwen3-TTS inference and serving",
        epilog="also: `gateway [serve's flags]` (the light gateway) and `ray-serve [--help]` (replicas on Ray Serve)",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_synth(sub)
    add_transcribe(sub, _add_speed_flags)
    add_eval(sub)
    _add_make_test_model(sub)
    _add_make_preset_voices(sub)
    _add_bench(sub)
    _add_bench_serving(sub)
    _add_serve(sub)
    _add_wyoming(sub)
    _add_config(sub)
    _add_healthcheck(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["gateway"]:  # kept apart from the other commands' imports: the gateway stays small
        from .gateway.main import main as gateway_main

        return gateway_main(argv[1:])
    if argv[:1] == ["ray-serve"]:  # Ray Serve replicas (the `ray` extra), with flags of its own
        try:
            from .ray_app import main as ray_serve_main
        except TTSError as exc:  # Ray Serve is not installed
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return ray_serve_main(argv[1:])
    args = build_parser().parse_args(argv)
    args.argv = argv
    try:
        return args.func(args)
    except TTSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
