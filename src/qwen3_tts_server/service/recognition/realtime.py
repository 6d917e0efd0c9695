"""OpenAI's realtime transcription sessions (`WS /v1/realtime?intent=transcription`) over a live session
(`live_recognition.py`), in both forms clients speak: the beta one (header `OpenAI-Beta: realtime=v1`,
`transcription_session.update`, answered `transcription_session.created`/`updated`) and the current one
(`session.update` with `session.type: "transcription"` and its `audio.input` settings, answered `session.created`/
`updated`).

Audio: `input_audio_buffer.append` with base64 PCM16 (24 kHz; any rate from 8 to 48 kHz is taken) or G.711 mu-law or
A-law at 8 kHz; `.commit` ends the utterance with all its audio so far, speech going on at that moment going on in
the next item at once (beside server voice activity too); less than 100 ms appended since the last item ended is
OpenAI's `input_audio_buffer_commit_empty` error; one where server voice activity heard no speech since the last
item commits the audio kept since (the last 1.3 s at most); `.clear` drops it. Turn detection `server_vad`
(threshold, prefix padding, silence duration; `semantic_vad` is taken as `server_vad` with its defaults) emits
`input_audio_buffer.speech_started`, `.speech_stopped` and `.committed`; `null` leaves commits to the client. A
session that sets none has `server_vad`, except for OpenAI's realtime-only transcription models
(`gpt-realtime-whisper`, `gpt-live-transcribe`), which have no turn detection there: the client commits. Each
utterance is a conversation item: `conversation.item.input_audio_transcription.delta` carries text the later passes
keep (deltas are only ever appended), `.completed` the transcript, its `usage` (`{type: "duration", seconds}`) and
`languages` (`[{code}]`, the language heard), or `.failed` instead where its last pass failed (a pass that fails
before it is only logged: the next one hears its audio again), or where the session failed (then every item awaiting
its transcript gets one). Bad events are `error` events; audio is accepted before any update (clients send it at
once). An utterance that reaches MAX_SECONDS (1200 s) is committed there, the next item taking the audio after it."""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr

from ...audio.decoding import decode_g711, pcm_samples
from ...audio.voice_activity import VoiceActivitySettings
from ...engine.registry import ModelRegistry
from ...errors import EmptyCommitError, InvalidInputError, TTSError, checked, shown
from ...model.asr.languages import language_code, resolve_language
from ...protocols import Message, WireProtocol
from .live import CommitRefused, Committed, LiveSession, LiveTranscript, PassFailed, SpeechBoundary, cancelled
from .routing import route_recognizer
from .transcription import RecognitionService, check_context

SendEvent = Callable[[dict], Awaitable[None]]
REALTIME_TRANSCRIPTION = WireProtocol(
    "Realtime transcription sessions",
    "WS /v1/realtime?intent=transcription",
    "OpenAI's realtime transcription protocol, in its beta form (header `OpenAI-Beta: realtime=v1`) and its current "
    "one; every event is a JSON object with a `type` and, from the server, an `event_id`.",
    (
        Message("transcription_session.update", "client", "`session`: `input_audio_format`, "
                "`input_audio_transcription` (`model`, `language`, `prompt`), `turn_detection`",
                "the beta form's settings; answered by `transcription_session.updated`"),
        Message("session.update", "client", "`session`: `type` `transcription`, `audio.input` (`format`, "
                "`transcription`, `turn_detection`)", "the current form's settings; answered by `session.updated`"),
        Message("input_audio_buffer.append", "client", "`audio`: base64 PCM16 (24 kHz) or G.711 at 8 kHz",
                "audio for the utterance under way"),
        Message("input_audio_buffer.commit", "client", "",
                "ends the utterance (under 100 ms since the last: an error)"),
        Message("input_audio_buffer.clear", "client", "", "drops the utterance; answered by `.cleared`"),
        Message("transcription_session.created", "server", "`session`", "the beta form's greeting"),
        Message("transcription_session.updated", "server", "`session`", "the beta form's settings as taken"),
        Message("session.created", "server", "`session`", "the current form's greeting"),
        Message("session.updated", "server", "`session`", "the current form's settings as taken"),
        Message("input_audio_buffer.speech_started", "server", "`audio_start_ms`, `item_id`",
                "server voice activity heard speech begin"),
        Message("input_audio_buffer.speech_stopped", "server", "`audio_end_ms`, `item_id`",
                "server voice activity heard it end"),
        Message("input_audio_buffer.committed", "server", "`item_id`, `previous_item_id`",
                "an utterance ended (a commit, or speech stopped): its transcript follows"),
        Message("input_audio_buffer.cleared", "server", "", "the utterance was dropped"),
        Message("conversation.item.input_audio_transcription.delta", "server", "`item_id`, `content_index`, "
                "`delta`", "text the later passes keep, only ever appended"),
        Message("conversation.item.input_audio_transcription.completed", "server", "`item_id`, `content_index`, "
                "`transcript`, `usage`, `languages`", "the utterance's transcript"),
        Message("conversation.item.input_audio_transcription.failed", "server", "`item_id`, `content_index`, "
                "`error`", "the item's transcription failed (instead of `.completed`); the session goes on"),
        Message("error", "server", "`error`: `type`, `code`, `message`, `param`", "an event refused"),
    ),
)  # fmt: skip
BETA_FORMATS = {"pcm16": ("pcm16", 24000), "g711_ulaw": ("pcm_mulaw", 8000), "g711_alaw": ("pcm_alaw", 8000)}
FORMAT_TYPES = {"audio/pcm": "pcm16", "audio/pcmu": "g711_ulaw", "audio/pcma": "g711_alaw"}
SERVER_VAD = {"type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 300, "silence_duration_ms": 500}
# OpenAI's transcription models served only in realtime sessions, without turn detection: the client commits
REALTIME_ONLY_MODELS = ("gpt-realtime-whisper", "gpt-live-transcribe")
MIN_COMMIT_SECONDS = 0.1  # less in the buffer: OpenAI's input_audio_buffer_commit_empty
SERVER_VAD_KINDS = {"threshold": float, "prefix_padding_ms": int, "silence_duration_ms": int}


def event_id() -> str:
    return f"event_{uuid.uuid4().hex[:20]}"


@dataclass
class TranscriptionOptions:
    """A session's settings, as the client last gave them."""

    audio_format: str = "pcm16"  # a key of BETA_FORMATS
    rate: int = 24000
    model: str | None = None
    language: str | None = None  # as given: an ISO code or a name
    prompt: str = ""
    turn_detection_set: dict | None = None  # as the client last set it (whole and checked, `read_options`)
    turn_detection_given: bool = False  # set at all (null included)

    @property
    def turn_detection(self) -> dict | None:
        """As set; where never set, server_vad, or none for OpenAI's realtime-only models (as OpenAI does)."""
        if self.turn_detection_given:
            return self.turn_detection_set
        realtime_only = (self.model or "").lower().startswith(REALTIME_ONLY_MODELS)
        return None if realtime_only else dict(SERVER_VAD)

    def voice_activity(self) -> VoiceActivitySettings | None:
        turn = self.turn_detection
        if turn is None:
            return None
        return VoiceActivitySettings(turn["threshold"], turn["prefix_padding_ms"], turn["silence_duration_ms"])


def error_event(error: TTSError) -> dict:
    """A refusal as the realtime `error` event."""
    kind = "invalid_request_error" if error.status < 500 else "server_error"
    body = {"type": kind, "code": error.code, "message": str(error), "param": getattr(error, "param", None)}
    return {"type": "error", "event_id": event_id(), "error": body}


def _invalid(message: str, param: str) -> InvalidInputError:
    return InvalidInputError(message, param=param)


class _Fields(BaseModel):
    model_config = ConfigDict(extra="ignore")  # clients send settings this server has no use for


class _Format(_Fields):
    type: Literal["audio/pcm", "audio/pcmu", "audio/pcma"]
    rate: Annotated[int, Field(ge=8000, le=48000)] | None = None


class _Transcription(_Fields):
    model: StrictStr | None = None
    language: StrictStr | None = None
    prompt: StrictStr | None = None


# strict: a number, not a string or a boolean; finite, and bounded (what a padding holds is kept in memory)
_Milliseconds = Annotated[float, Field(strict=True, ge=0, le=60000, allow_inf_nan=False)]


class _TurnDetection(_Fields):
    type: Literal["server_vad", "semantic_vad"]
    threshold: Annotated[float, Field(strict=True, gt=0, lt=1)] | None = None
    prefix_padding_ms: _Milliseconds | None = None
    silence_duration_ms: _Milliseconds | None = None


def read_options(session: Any, options: TranscriptionOptions, beta: bool) -> TranscriptionOptions:
    """The options after an update's `session` object (only the keys it sets change), checked."""
    if not isinstance(session, dict):
        raise _invalid("session is an object", "session")
    audio = session["audio"].get("input") if isinstance(session.get("audio"), dict) else None
    audio = audio if isinstance(audio, dict) else {}
    changed = TranscriptionOptions(**vars(options))
    if not beta and session.get("type", "transcription") != "transcription":
        raise _invalid("this server serves transcription sessions: session.type is 'transcription'", "session.type")
    format_ = audio.get("format", session.get("input_audio_format"))
    if isinstance(format_, dict):  # {"type": "audio/pcm", "rate": 24000}
        given = checked(_Format, format_, "session.audio.input.format")
        kind = FORMAT_TYPES[given.type]
        changed.audio_format, changed.rate = kind, given.rate or BETA_FORMATS[kind][1]
    elif format_ is not None:
        if not isinstance(format_, str) or format_ not in BETA_FORMATS:
            raise _invalid(f"input_audio_format is one of {', '.join(BETA_FORMATS)}", "session.input_audio_format")
        changed.audio_format, changed.rate = format_, BETA_FORMATS[format_][1]
    transcription = audio.get("transcription", session.get("input_audio_transcription"))
    if transcription is not None:
        fields = checked(_Transcription, transcription, "session.input_audio_transcription")
        changed.model = fields.model or changed.model
        if "language" in fields.model_fields_set:
            changed.language = fields.language or None
            resolve_language(changed.language, "session.input_audio_transcription.language")
        if "prompt" in fields.model_fields_set:
            changed.prompt = fields.prompt or ""
    if "turn_detection" in audio or "turn_detection" in session:
        turn = audio["turn_detection"] if "turn_detection" in audio else session["turn_detection"]
        if turn is None:
            changed.turn_detection_set = None
        else:  # semantic_vad is taken as server_vad, with the defaults for what it does not set
            fields = checked(_TurnDetection, turn, "session.turn_detection")
            given = fields.model_dump(exclude={"type"}, exclude_none=True)
            changed.turn_detection_set = SERVER_VAD | {
                key: SERVER_VAD_KINDS[key](value) for key, value in given.items()
            }
        changed.turn_detection_given = True
    return changed


class RealtimeTranscription:
    """One connection's session: `open`, then `handle` each text message, `close` when the client leaves."""

    def __init__(
        self,
        registry: ModelRegistry,
        recognition: dict[str, RecognitionService],
        send: SendEvent,
        beta: bool,
        max_pending_seconds: float,
    ):
        self.registry, self.recognition, self.send, self.beta = registry, recognition, send, beta
        self.max_pending_seconds = max_pending_seconds
        self.options = TranscriptionOptions()
        self.id = f"sess_{uuid.uuid4().hex[:20]}"
        self.live: LiveSession | None = None
        self._engine_id: str | None = None
        self._pump: asyncio.Task | None = None
        self._items: dict[int, str] = {}  # utterance -> item id
        self._previous_item: str | None = None
        self._sent: dict[int, str] = {}  # utterance -> text sent in deltas
        self._seconds: dict[int, float] = {}  # utterance -> its audio's length

    async def open(self) -> None:
        await self._restart()
        await self.send({"type": self._kind("created"), "event_id": event_id(), "session": self.session_object()})

    async def close(self) -> None:
        """The client left: the session's work stops."""
        if self.live is not None:
            await self.live.cancel()
        await cancelled(self._pump)

    def _kind(self, verb: str) -> str:
        return f"transcription_session.{verb}" if self.beta else f"session.{verb}"

    def session_object(self) -> dict:
        options = self.options
        transcription = {"model": options.model, "language": options.language, "prompt": options.prompt}
        if self.beta:
            return {
                "id": self.id,
                "object": "realtime.transcription_session",
                "input_audio_format": options.audio_format,
                "input_audio_transcription": transcription,
                "turn_detection": options.turn_detection,
                "input_audio_noise_reduction": None,
                "include": None,
            }
        format_type = next(kind for kind, name in FORMAT_TYPES.items() if name == options.audio_format)
        audio_format = {"type": format_type} | ({"rate": options.rate} if format_type == "audio/pcm" else {})
        return {
            "type": "transcription",
            "id": self.id,
            "object": "realtime.transcription_session",
            "audio": {
                "input": {
                    "format": audio_format,
                    "transcription": transcription,
                    "turn_detection": options.turn_detection,
                    "noise_reduction": None,
                }
            },
            "include": [],
        }

    async def handle(self, text: str) -> bool:
        """Whether the event was of use: taken, and (an append) with audio."""
        try:
            message = json.loads(text)
        except (ValueError, RecursionError):  # not JSON, nested too deep, or an integer of too many digits
            await self._error(_invalid("a client event is a JSON object", "event"), None)
            return False
        if not isinstance(message, dict):
            await self._error(_invalid("a client event is a JSON object", "event"), None)
            return False
        kind, client_event = message.get("type"), message.get("event_id")
        try:
            if kind in ("transcription_session.update", "session.update"):
                await self._update(message.get("session"))
            elif kind == "input_audio_buffer.append":
                return self._append(message.get("audio"))
            elif kind == "input_audio_buffer.commit":
                if self.live is not None:
                    self.live.commit(MIN_COMMIT_SECONDS)
            elif kind == "input_audio_buffer.clear":
                if self.live is not None:
                    self.live.clear()
                await self.send({"type": "input_audio_buffer.cleared", "event_id": event_id()})
            else:
                raise _invalid(f"unknown event type {shown(kind)}", "type")
        except TTSError as error:
            await self._error(error, client_event)
            return False
        return True

    async def _update(self, session: Any) -> None:
        try:
            options = read_options(session, self.options, self.beta)
        except (TypeError, ValueError, AttributeError) as exc:  # a field of the wrong kind
            raise _invalid(f"session: {exc}", "session") from None
        hosted = route_recognizer(self.registry, options.model)
        if options.prompt != self.options.prompt:
            await self._check_prompt(options.prompt, hosted.id)
        self.options = options
        if hosted.id != self._engine_id or self.live is None or self.live.rate != options.rate:
            await self._restart()
        else:
            language = resolve_language(options.language)
            self.live.configure(language, options.prompt, options.voice_activity())
        await self.send({"type": self._kind("updated"), "event_id": event_id(), "session": self.session_object()})

    async def _check_prompt(self, prompt: Any, engine_id: str) -> None:
        """The transcription prompt checked as the HTTP routes check theirs: refused whole, the session unchanged."""
        param = f"session.{'input_audio_transcription' if self.beta else 'audio.input.transcription'}.prompt"
        if not isinstance(prompt, str):
            raise _invalid("prompt is a string", param)
        check_context(await self.recognition[engine_id].engine.models.get_async(), prompt, param)

    async def _restart(self) -> None:
        """A live session for the current options (the previous one, if any, ends; what it held is dropped)."""
        await self.close()
        hosted = route_recognizer(self.registry, self.options.model)
        options = self.options
        service = self.recognition[hosted.id]
        self.live = LiveSession(
            service.engine,
            options.rate,
            resolve_language(options.language),
            options.prompt,
            options.voice_activity(),
            self.max_pending_seconds,
            slots=service.live_slots,
        )
        await self.live.start()
        self._engine_id = hosted.id
        self._items, self._sent, self._seconds = {}, {}, {}
        self._pump = asyncio.create_task(self._forward(self.live))

    def _append(self, audio: Any) -> bool:
        """Whether there was audio."""
        if not isinstance(audio, str):
            raise _invalid("audio is base64 text", "audio")
        try:
            data = base64.b64decode(audio, validate=True)
        except (binascii.Error, ValueError):
            raise _invalid("audio is not valid base64", "audio") from None
        codec = BETA_FORMATS[self.options.audio_format][0]
        samples = pcm_samples(data, 2, 1) if codec == "pcm16" else decode_g711(data, codec)
        if len(samples) and self.live is not None:
            self.live.append(samples)
        return bool(len(samples))

    async def _error(self, error: TTSError, client_event: str | None) -> None:
        event = error_event(error)
        event["error"]["event_id"] = client_event
        await self.send(event)

    def _item(self, utterance: int) -> str:
        return self._items.setdefault(utterance, f"item_{uuid.uuid4().hex[:20]}")

    async def _forward(self, live: LiveSession) -> None:
        """The live session's events, as realtime events."""
        while (event := await live.events.get()) is not None:
            if isinstance(event, SpeechBoundary):
                edge = "start" if event.kind == "started" else "end"
                await self.send(
                    {
                        "type": f"input_audio_buffer.speech_{event.kind}",
                        "event_id": event_id(),
                        f"audio_{edge}_ms": round(event.seconds * 1000),
                        "item_id": self._item(event.utterance),
                    }
                )
            elif isinstance(event, Committed):
                item = self._item(event.utterance)
                self._seconds[event.utterance] = event.seconds
                await self.send(
                    {
                        "type": "input_audio_buffer.committed",
                        "event_id": event_id(),
                        "previous_item_id": self._previous_item,
                        "item_id": item,
                    }
                )
                self._previous_item = item
            elif isinstance(event, CommitRefused):
                await self._error(EmptyCommitError(_empty_commit(event)), None)
            elif isinstance(event, TTSError):  # the session failed: it ends, and so do the items awaiting transcripts
                for utterance in list(self._seconds):
                    await self._failed(utterance, event)
                await self._error(event, None)
            elif not isinstance(event, PassFailed):  # (a failed pass shows in its item's final)
                await self._transcribed(event)

    async def _transcribed(self, event: LiveTranscript) -> None:
        item, sent = self._item(event.utterance), self._sent.get(event.utterance, "")
        if event.settled.startswith(sent) and len(event.settled) > len(sent):
            self._sent[event.utterance] = event.settled
            await self.send(
                {
                    "type": "conversation.item.input_audio_transcription.delta",
                    "event_id": event_id(),
                    "item_id": item,
                    "content_index": 0,
                    "delta": event.settled[len(sent) :],
                }
            )
        if event.final and event.failure is not None:
            await self._failed(event.utterance, event.failure)
        elif event.final:
            seconds = self._seconds.pop(event.utterance, 0.0)
            await self.send(
                {
                    "type": "conversation.item.input_audio_transcription.completed",
                    "event_id": event_id(),
                    "item_id": item,
                    "content_index": 0,
                    "transcript": event.text,
                    "usage": {"type": "duration", "seconds": round(seconds, 3)},
                    "languages": [{"code": code} for code in language_codes(event.language)],
                }
            )

    async def _failed(self, utterance: int, error: TTSError) -> None:
        self._seconds.pop(utterance, None)
        await self.send(
            {
                "type": "conversation.item.input_audio_transcription.failed",
                "event_id": event_id(),
                "item_id": self._item(utterance),
                "content_index": 0,
                "error": {"type": "transcription_error", "code": error.code, "message": str(error)},
            }
        )


def _empty_commit(refused: CommitRefused) -> str:
    return (
        "Error committing input audio buffer: buffer too small. Expected at least "
        f"{MIN_COMMIT_SECONDS * 1000:.0f}ms of audio, but buffer only has {refused.seconds * 1000:.2f}ms of audio."
    )


def language_codes(languages: str) -> list[str]:
    """The ISO 639 codes of the languages a transcript names ("English,Chinese"), those it knows, once each."""
    codes = (language_code(name.strip()) for name in languages.split(","))
    return list(dict.fromkeys(code for code in codes if code))
