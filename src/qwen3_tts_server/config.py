"""Every setting of the server in one place: environment variables (the earlier server's names), an optional
`.env` file, and matching command-line flags generated from the same fields. Light on purpose (no torch):
the gateway process reads it too."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from .errors import ConfigurationError

DEFAULT_MODEL = "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice"
# No segment runs past this many frames (80 ms each: 20 minutes); reaching it ends the segment with
# finish_reason "length", never silently.
MAX_REQUEST_FRAMES = 15000
MAX_TRANSCRIPTION_BYTES = 25 * 2**20  # OpenAI's upload limit for a recording to transcribe
# A recording's longest duration: what it may decode to is bounded, not only its bytes (a few KB of FLAC can declare
# hours). 30 minutes: about 25 MiB of MP3 at 112 kbps, and more than one of the official 20-minute parts.
MAX_TRANSCRIPTION_SECONDS = 1800.0
# Rows per decode step when MAX_BATCH_SIZE is unset (here, not in the engine: Ray's build process decides it for
# the replicas' device without torch).
DEFAULT_EMIT_FRAMES = 4  # the earlier server's STREAM_EMIT_FRAMES default, used when only STREAM_FIRST_EMIT is set
GPU_BATCH_SIZE = 64
CPU_BATCH_SIZE = 16
FLAG_ALIASES = {"model_id": ["--model"], "unix_socket_path": ["--uds"]}
# Variables the earlier server read that this one does not (yet): named in a warning at start when set.
UNSUPPORTED_VARIABLES = {
    "VAD_TRIM": "removed (the earlier server dropped it too): synthesized audio is not trimmed",
    "WARMUP_TEXTS": "not needed: the model is warmed up with a short synthesis when it loads",
    "TORCH_COMPILE_MODE": "TORCH_COMPILE compiles the frame step's layers in inductor's default mode; on a GPU the "
    "whole step replays as CUDA graphs of its own (CUDA_GRAPHS), which max-autotune and reduce-overhead would "
    "capture again",
}


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", env_file_encoding="utf-8", extra="ignore", populate_by_name=True)

    # The model.
    model_id: str = Field(DEFAULT_MODEL, description="checkpoint directory or hub id (the one-model form of MODELS)")
    models: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="checkpoints hosted at once, comma-separated (or --model repeated); the first is MODEL_ID",
    )
    model_memory_budget: str | None = Field(
        None,
        description="bytes every loaded model may take together (suffix K, M, G), or auto: the GPU's free memory "
        "or the available RAM at start, less a tenth; the least recently used idle model is unloaded for another",
    )
    device: str = Field("auto", description="torch device: auto (cuda when present, else cpu), cpu, cuda, cuda:1")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="weights' dtype: auto is bfloat16 on a GPU, float32 on a CPU"
    )
    quantize: Literal["none", "int8", "int4", "fp8"] = Field(
        "none", description="weight-only quantisation of the decoder layers: int8 or int4; fp8 on CUDA only"
    )
    torch_compile: bool | None = Field(
        None,
        description="compile the frame step's layers (torch.compile) at warm-up: on, off, or auto (off: 0 to 4 "
        "percent faster on a CPU for seconds of compiling; on CUDA the step replays as CUDA graphs)",
    )
    stream_type: Literal["token", "sentence"] = Field(
        "token",
        description="how streamed audio is cut by default (a request's stream_mode overrides it): token, in chunks "
        "of frames as they are made (STREAM_FIRST_EMIT, then STREAM_EMIT_FRAMES); sentence, one chunk per text "
        "segment (a sentence or a few, at most 300 characters)",
    )
    stream_emit_frames: int | None = Field(
        None, ge=1, description="token streaming: frames per chunk (80 ms each; default: 1, 2, 4, then 8)"
    )
    stream_first_emit: int | None = Field(
        None, ge=0, description="token streaming: frames in the first chunk (0: as STREAM_EMIT_FRAMES)"
    )
    cuda_graphs: bool = Field(
        True,
        description="replay the frame step as CUDA graphs on a GPU (a capture that fails or replays other codes than "
        "the eager step falls back to it, as /health's cuda_graphs says)",
    )
    default_voice: str = Field(
        "vivian", min_length=1, description="the voice of a request that names none (the earlier server's default)"
    )
    preload_model: bool = Field(False, description="load every model at start instead of on its first request")
    preload_models: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="hosted models (ids) loaded at start, comma-separated"
    )
    idle_timeout: float = Field(
        120.0, ge=0, description="seconds without work before the model (gateway: the worker) is unloaded; 0 never"
    )
    # The engine.
    max_batch_size: int | None = Field(None, ge=1, description="rows per decode step (default 16 on CPU, 64 on GPU)")
    max_queue_depth: int = Field(
        64, ge=0, description="requests waiting for a row before new ones get 503; 0 no limit (as the earlier server)"
    )
    request_timeout: float = Field(
        300.0,
        ge=0,
        description="seconds a request may take, time paused for a slow client not counted; also how long a client "
        "may take no audio before it is dropped; 0 no limit",
    )
    stream_buffer_seconds: float = Field(
        30.0,
        ge=0,
        description="audio a stream may hold ahead of what its client has taken; past it the stream's engine row "
        "pauses until the client catches up; 0 no bound",
    )
    max_request_frames: int = Field(
        MAX_REQUEST_FRAMES,
        ge=1,
        validation_alias=AliasChoices("max_request_frames", "max_new_tokens"),
        description="frames (80 ms each) one segment may make; reaching it ends it as cut (also MAX_NEW_TOKENS)",
    )
    inference_cpu_cores: str | None = Field(
        None, description="CPU cores for the engine thread, e.g. 0-3 or 0,2 (default: all); its torch threads follow"
    )
    # Recognition.
    max_transcription_bytes: int = Field(
        MAX_TRANSCRIPTION_BYTES,
        ge=1,
        description="bytes a recording to transcribe may be (an upload, or a Wyoming utterance); past it a 413 "
        "(default 25 MiB, OpenAI's limit)",
    )
    max_transcription_seconds: float = Field(
        MAX_TRANSCRIPTION_SECONDS,
        gt=0,
        description="seconds a recording to transcribe may last; decoding stops there with a 400 audio_too_long "
        "(default 1800 s: 30 minutes, about 25 MiB of MP3 at 112 kbps)",
    )
    max_transcription_tokens: int | None = Field(
        None,
        ge=1,
        description="tokens one part of a recording may decode (the official package's max_new_tokens); reaching it "
        "ends the part as cut; unset: 16 a second of its audio, at least 64",
    )
    korean_words: Path | None = Field(
        None,
        description="the official Korean word list for Korean word timestamps (korean_dict_jieba.dict of the "
        "qwen-asr package; default: the list of an installed qwen-asr)",
    )
    subtitle_max_duration: float = Field(7.0, gt=0, description="seconds a subtitle cue lasts at most")
    subtitle_pause_threshold: float = Field(
        0.5, ge=0, description="seconds of silence between two words that end a subtitle cue"
    )
    subtitle_min_duration: float = Field(
        0.833, ge=0, description="seconds a subtitle cue is held at least, where the next one leaves room"
    )
    subtitle_min_gap: float = Field(0.083, ge=0, description="seconds between two subtitle cues at least")
    translate_base_url: str | None = Field(
        None,
        validation_alias=AliasChoices("translate_base_url", "openai_base_url"),
        description="an OpenAI-compatible chat API (e.g. http://localhost:11434/v1) that /v1/audio/translations "
        "sends transcripts to; unset, that route answers 501 (also OPENAI_BASE_URL, the earlier ASR server's name)",
    )
    translate_api_key: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices("translate_api_key", "openai_api_key"),
        description="its API key, if it needs one (also OPENAI_API_KEY)",
    )
    translate_model: str | None = Field(None, description="the chat model that translates, e.g. qwen3:8b")
    # Live recognition.
    live_server_vad: bool = Field(
        True,
        validation_alias=AliasChoices("live_server_vad", "asr_use_server_vad"),
        description="voice activity ends the utterances of live sessions unless a session says otherwise",
    )
    vad_threshold: float = Field(0.5, gt=0, lt=1, description="speech probability that starts speech (Silero VAD)")
    vad_prefix_padding_ms: int = Field(300, ge=0, description="audio kept before speech starts, in ms")
    vad_silence_ms: int = Field(500, ge=0, description="silence that ends an utterance, in ms")
    live_max_pending_seconds: float = Field(
        30.0, gt=0, description="seconds of audio a live session may have waiting for recognition; past it an error"
    )
    live_max_sessions: int = Field(
        0,
        ge=0,
        description="live sessions (WS /ws/transcribe, realtime, Wyoming) each transcriber serves at once; past it "
        "a new one is refused (503 live_session_limit); 0: no limit",
    )
    live_idle_timeout: float = Field(
        60.0,
        ge=0,
        description="seconds a live WebSocket (WS /ws/transcribe, realtime transcription) may go without a message "
        "from its client or to it, and a Wyoming utterance without audio before its audio-stop; then a 408 "
        "idle_timeout error (and close 1001), its session slot given back; 0: never",
    )
    # Text, voices and audio.
    text_normalize: bool = Field(True, description="read numbers, dates, symbols... as words unless a request says")
    data_dir: Path | None = Field(None, description="voice library (default ~/.local/share/qwen3-tts-server)")
    voice_cache_max: int = Field(32, ge=0, description="clone prompts kept in memory")
    audio_cache_max: int = Field(256, ge=0, description="whole responses kept in the output cache; 0 disables it")
    audio_cache_max_bytes: int = Field(256 << 20, ge=1, description="bytes the in-memory output cache may hold")
    audio_cache_sampled: bool = Field(
        True, description="cache sampled requests without a seed too (a repeat replays the first audio)"
    )
    audio_cache_ttl: float = Field(86400.0, gt=0, description="seconds an output cache entry lives in Redis")
    redis_url: str | None = Field(None, description="share the output cache through Redis, e.g. redis://host:6379/0")
    # Serving.
    host: str = Field("127.0.0.1", description="address to listen on (0.0.0.0 for every interface)")
    port: int = Field(8000, ge=0, le=65535, description="TCP port")
    unix_socket_path: Path | None = Field(None, description="listen on this Unix socket instead of host:port")
    api_key: SecretStr | None = Field(None, description="require Authorization: Bearer <key> (not /health, /ready)")
    api_keys: Annotated[list[SecretStr], NoDecode] = Field(
        [], description="keys accepted as API_KEY is, comma-separated (rotation: old and new at once)"
    )
    cors_origins: Annotated[list[str], NoDecode] = Field(
        [], description="browser origins allowed to call the API, comma-separated, * for any; none by default"
    )
    max_websockets: int = Field(
        256, ge=0, description="open WebSocket connections; past it a new one is closed with 1013; 0 no limit"
    )
    max_pending_text: int = Field(
        16384, ge=1, description="characters a WebSocket session may have waiting to be spoken; past it an error"
    )
    body_timeout: float = Field(
        30.0, gt=0, description="seconds a client may take to send a request body; past it a 408"
    )
    wyoming_port: int | None = Field(
        None,
        ge=0,
        le=65535,
        description="also serve the Wyoming protocol (Home Assistant) on this TCP port, e.g. 10200; no API key "
        "applies there: local network only",
    )
    wyoming_host: str | None = Field(
        None, description="address the Wyoming port listens on (default: HOST; 0.0.0.0 for Home Assistant elsewhere)"
    )
    wyoming_zeroconf: bool = Field(
        False, description="advertise the Wyoming port over mDNS for Home Assistant discovery"
    )
    ssl_keyfile: Path | None = Field(None, description="TLS private key (PEM); with SSL_CERTFILE serves HTTPS")
    ssl_certfile: Path | None = Field(
        None, validate_default=True, description="TLS certificate chain (PEM); with SSL_KEYFILE serves HTTPS"
    )
    timeout_keep_alive: float = Field(
        65.0, gt=0, description="seconds an idle keep-alive connection stays open (above load balancers' 60 s)"
    )
    shutdown_grace: float = Field(30.0, ge=0, description="seconds in-flight requests get to finish on SIGTERM")
    log_format: Literal["json", "text"] = Field("json", description="one JSON object per line, or plain text")
    log_level: Literal["debug", "info", "warning", "error"] = Field("info", description="debug also logs the text")
    # Gateway mode.
    gateway_mode: bool = Field(False, description="`serve` runs the light gateway, which starts a worker on demand")
    worker_host: str = Field("127.0.0.1", description="where the gateway's worker listens")
    worker_port: int = Field(0, ge=0, le=65535, description="the worker's port; 0 picks a free one")
    worker_start_timeout: float = Field(600.0, gt=0, description="seconds the gateway waits for a worker to be ready")

    @field_validator(
        "max_batch_size",
        "data_dir",
        "redis_url",
        "unix_socket_path",
        "api_key",
        "inference_cpu_cores",
        "ssl_keyfile",
        "ssl_certfile",
        "torch_compile",
        "wyoming_port",
        "wyoming_host",
        mode="before",
    )
    @classmethod
    def _empty_is_unset(cls, value: Any) -> Any:
        """VAR= (or --flag "") unsets an optional setting, also over a value in .env."""
        return None if value == "" else value

    @model_validator(mode="before")
    @classmethod
    def _repeated_model_flag(cls, values: Any) -> Any:
        """--model given more than once hosts each (MODELS); once, it is MODEL_ID."""
        if isinstance(values, dict) and isinstance(values.get("model_id"), list):
            given = [part.strip() for item in values["model_id"] for part in item.split(",") if part.strip()]
            values = {**values, "model_id": given[0] if given else DEFAULT_MODEL}
            if len(given) > 1:
                values["models"] = given
        return values

    @model_validator(mode="after")
    def _first_model_is_model_id(self) -> Settings:
        if self.models:
            self.model_id = self.models[0]
        return self

    @field_validator("model_memory_budget", mode="before")
    @classmethod
    def _budget(cls, value: Any) -> Any:
        if value in ("", None):
            return None
        text = str(value).strip().lower()
        if text != "auto":
            parse_bytes(text)
        return text

    @field_validator("api_keys", "cors_origins", "models", "preload_models", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        """A,B from the environment or a flag; a list as it is."""
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("torch_compile", mode="before")
    @classmethod
    def _auto_compile(cls, value: Any) -> Any:
        return None if isinstance(value, str) and value.strip().lower() == "auto" else value

    @field_validator("inference_cpu_cores")
    @classmethod
    def _valid_cores(cls, value: str | None) -> str | None:
        if value is not None:
            parse_cores(value)
        return value

    @field_validator("ssl_keyfile", "ssl_certfile")
    @classmethod
    def _readable_file(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_file():
            raise ValueError(f"no such file: {value}")
        return value

    @field_validator("ssl_certfile")
    @classmethod
    def _tls_pair(cls, certfile: Path | None, info: ValidationInfo) -> Path | None:
        """Both TLS files or neither (checked here, on the later field, so that the error names a variable)."""
        if "ssl_keyfile" in info.data and (info.data["ssl_keyfile"] is None) != (certfile is None):
            alone = "SSL_CERTFILE" if certfile is not None else "SSL_KEYFILE"
            raise ValueError(f"SSL_KEYFILE and SSL_CERTFILE go together (HTTPS) but {alone} is set alone")
        return certfile

    def accepted_keys(self) -> list[str]:
        """Every key a request may carry (API_KEY and API_KEYS); empty: no key is required."""
        keys = ([self.api_key] if self.api_key is not None else []) + self.api_keys
        return [key.get_secret_value() for key in keys if key.get_secret_value()]

    def hosted_models(self) -> list[str]:
        """The checkpoints to host: MODELS, or MODEL_ID alone."""
        return self.models or [self.model_id]

    def memory_budget_bytes(self) -> int | None:
        """MODEL_MEMORY_BUDGET in bytes; None when unset or auto (measured at start)."""
        budget = self.model_memory_budget
        return None if budget in (None, "auto") else parse_bytes(budget)

    def cpu_cores(self) -> set[int] | None:
        """The cores INFERENCE_CPU_CORES names; None: every core the process may use."""
        return parse_cores(self.inference_cpu_cores) if self.inference_cpu_cores else None

    @classmethod
    def load(cls, **overrides: Any) -> Settings:
        """The environment and .env, then `overrides` (command-line flags); a bad value raises
        ConfigurationError naming its environment variable."""
        try:
            return cls(**{name: value for name, value in overrides.items() if value is not None})
        except ValidationError as exc:
            problems = [
                f"{env_name(str(error['loc'][0]))}={error.get('input')!r}: {error['msg']}" for error in exc.errors()
            ]
            raise ConfigurationError("invalid setting: " + "; ".join(problems)) from None

    def effective(self) -> dict[str, Any]:
        """Every setting by environment variable name, the API key masked."""
        values = json.loads(self.model_dump_json())
        if self.api_key is not None:
            values["api_key"] = "********"
        values["api_keys"] = ["********"] * len(self.api_keys)
        if self.translate_api_key is not None:
            values["translate_api_key"] = "********"
        return {env_name(name): value for name, value in values.items()}

    def resolved_device(self) -> str:
        if self.device != "auto":
            return self.device
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"

    def resolved_dtype(self, device: str) -> str:
        if self.dtype != "auto":
            return self.dtype
        return "float32" if device == "cpu" else "bfloat16"

    def token_chunks(self) -> tuple[int, ...] | None:
        """The token mode's chunk sizes in frames (the last repeats) from STREAM_FIRST_EMIT and STREAM_EMIT_FRAMES;
        None when neither is set: the engine's default schedule."""
        if self.stream_emit_frames is None and self.stream_first_emit is None:
            return None
        emit = self.stream_emit_frames or DEFAULT_EMIT_FRAMES
        return (self.stream_first_emit or emit, emit)

    def resolved_compile(self) -> bool:
        """TORCH_COMPILE, or its default: off. On a CPU it measured 0-4% faster (0.6B, int8 and int4, 1 to 16
        streams) for 5 s more before ready; on CUDA the step replays as CUDA graphs instead."""
        return bool(self.torch_compile)


def unsupported_variable_warnings(environ: Mapping[str, str] = os.environ) -> list[str]:
    """One line for each variable of UNSUPPORTED_VARIABLES set (not empty) in `environ`: `serve` logs them at
    start, `config` prints them (the gateway relays those)."""
    return [
        f"{name} is set but ignored: {advice}" for name, advice in UNSUPPORTED_VARIABLES.items() if environ.get(name)
    ]


def parse_cores(spec: str) -> set[int]:
    """CPU numbers from a list like `0-3,6` (taskset's syntax)."""
    cores: set[int] = set()
    for part in spec.replace(" ", "").split(","):
        first, _, last = part.partition("-")
        if not first.isdigit() or (last and not last.isdigit()) or (last and int(last) < int(first)):
            raise ValueError(f"{spec!r} is not a list of cores like 0-3,6")
        cores.update(range(int(first), int(last or first) + 1))
    return cores


def model_id_of(source: str) -> str:
    """A hosted model's id: a local checkpoint's directory name, or the hub id as given."""
    path = Path(source).expanduser()
    return path.resolve().name if path.exists() else source


def parse_bytes(text: str) -> int:
    """A byte count: digits with an optional K, M, G or T suffix (powers of 1024; a trailing B or iB allowed)."""
    cleaned = text.strip().lower().removesuffix("ib").removesuffix("b")
    scale = 1
    if cleaned[-1:] in "kmgt" and cleaned[-1:]:
        scale = 1024 ** ("kmgt".index(cleaned[-1]) + 1)
        cleaned = cleaned[:-1]
    try:
        amount = float(cleaned)
    except ValueError:
        raise ValueError(f"{text!r} is not a size like 8G, 512M or a number of bytes") from None
    if amount <= 0:
        raise ValueError(f"{text!r} is not a positive size")
    return int(amount * scale)


def env_name(field: str) -> str:
    return field.upper()


def add_flags(parser: argparse.ArgumentParser, fields: list[str] | None = None) -> None:
    """A --flag for each setting (or the ones named), defaulting to None so that unset flags leave the
    environment's value; booleans get --flag/--no-flag."""
    for name, info in Settings.model_fields.items():
        if fields is not None and name not in fields:
            continue
        flags = ["--" + name.replace("_", "-"), *FLAG_ALIASES.get(name, [])]
        help_text = f"{info.description} (env {env_name(name)}; default {_shown_default(info.default)})"
        if name == "model_id":
            parser.add_argument(*flags, dest=name, action="append", default=None, metavar="MODEL", help=help_text)
        elif info.annotation is bool:
            parser.add_argument(*flags, dest=name, action=argparse.BooleanOptionalAction, default=None, help=help_text)
        else:
            parser.add_argument(*flags, dest=name, default=None, metavar=env_name(name), help=help_text)


def from_args(args: argparse.Namespace) -> Settings:
    """Settings from the environment with the flags that were given on top."""
    return Settings.load(**{name: getattr(args, name, None) for name in Settings.model_fields})


def _shown_default(value: Any) -> str:
    if isinstance(value, int) and value >= 1 << 20 and value % (1 << 20) == 0:
        return f"{value >> 20} MiB"
    return "none" if value is None else str(value)
