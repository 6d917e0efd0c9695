"""Cartesia's text-to-speech protocol, as LiveKit's and Pipecat's Cartesia plugins speak it: the socket
(`/tts/websocket`), where several contexts share one connection, each a `RealtimeSession` of its own whose flushes
end its utterances; and the HTTP generations (`/tts/bytes`, `/tts/sse`).

What the plugins need of it, read from their code (livekit-plugins-cartesia 1.8.9 `tts.py`, pipecat-ai 1.14.0
`services/cartesia/tts.py`): the key in `X-API-Key`, the version as `?cartesia_version=` (LiveKit) or a
`Cartesia-Version` header (Pipecat); every message carries the whole request (model, voice, format, language) beside
its `transcript` and `context_id`; `continue: true` adds text, and a context ends with `continue: false` and a
transcript of " " (LiveKit, after a sentence a message) or "" (Pipecat, after the whole text in one message). Both
read base64 audio in `chunk` messages and end a context on `done`; words come as `timestamps` (`word_timestamps`:
words as written, marks included, and their start and end in seconds from the context's first audio), which Pipecat
drops once the context's `done` has come. Pipecat reads `context_id` in every message and treats any type but
chunk, timestamps, done, error and flush_done as an error; LiveKit reads `done: true` before it reads the type, so
an error (which Cartesia marks done) ends its stream without a word. Pipecat sends `{context_id, cancel: true}` on a
barge-in; LiveKit sends nothing and leaves the context unfinished."""

from __future__ import annotations

import base64
import json
import logging
import re
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, cast

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ...errors import InvalidInputError, TTSError, checked, shown
from ...model.asr.aligner import TimedWord, timed_by_length
from ...protocols import Message, WireProtocol, json_message
from .contexts import ContextSocket, Send, joined
from .realtime import RealtimeSession, RequestParser
from .requests import language_of_code
from .stream import SpeechOutput
from .synthesis import SpeechService
from .word_times import written_words

log = logging.getLogger(__name__)
RAW_ENCODINGS = {"pcm_s16le": "pcm", "pcm_f32le": "pcm", "pcm_mulaw": "mulaw", "pcm_alaw": "alaw"}
EVENT_CONTAINERS = ("raw",)  # where audio travels in messages: the socket, the SSE
HTTP_CONTAINERS = ("raw", "wav", "mp3")
CARTESIA_VOICE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)
MAX_CONTEXTS = 16  # open at once on one socket; past it, the least recently used context with nothing to play goes
ENDED_KEPT = 64  # contexts ended, cancelled or dropped, remembered: a cancel that crossed their `done` is no error
PARTIAL, COMPLETE = 206, 200  # the status codes Cartesia's messages carry

CARTESIA_TTS_SOCKET = WireProtocol(
    "Cartesia's streaming speech WebSocket",
    "WS /tts/websocket",
    "Cartesia's text-to-speech socket, as LiveKit's and Pipecat's Cartesia plugins speak it (their base URL set to "
    "this server): the key in `X-API-Key` (or `?api_key=`), `Cartesia-Version` or `?cartesia_version=` taken, any "
    "value. Several contexts share a socket, each spoken in turn of its own; every message carries the request: "
    "`model_id` (`sonic-*`, like any name not ours, leaves the model to the voice), `voice` `{mode: id, id}` (one of "
    "ours; a Cartesia voice's UUID is spoken by the server's default voice), `language` (an ISO code), "
    "`output_format` `{container: raw, encoding: pcm_s16le, pcm_f32le, pcm_mulaw or pcm_alaw, sample_rate}`, "
    "`generation_config.speed`; a context keeps what its first message asked. With `add_timestamps` and a "
    f"ForcedAligner hosted, its words come timed. At most {MAX_CONTEXTS} contexts are open at once: past that, the "
    "least recently used one with nothing left to play is dropped (LiveKit leaves a context it stops unfinished).",
    (
        Message("generation", "client", "`transcript`, `context_id`, `continue`, `flush`, `add_timestamps`, and the "
                "request's fields", "text of the context (opening it on its first message), spoken from its first "
                "finished clause; `continue: false` (or none) ends the context: its text is spoken, then `done`; a "
                "transcript longer than a context may have waiting to be spoken (MAX_PENDING_TEXT) is refused"),
        Message("flush", "client", "`flush: true` in a generation message",
                "the context's text so far is spoken; `flush_done` follows its audio"),
        Message("cancel", "client", "`context_id`, `cancel: true`",
                "the context stops at once: its audio not yet sent and its text are dropped, nothing more is sent "
                "for it"),
        Message("chunk", "server", "`data` (base64 audio), `done: false`, `status_code: 206`, `step_time` (ms since "
                "the context's chunk before, or its opening), `flush_id`, `context_id`",
                "a piece of the context's audio"),
        Message("timestamps", "server", "`word_timestamps` (`words` as written, `start`, `end`: seconds from the "
                "context's first audio), `done: false`, `status_code: 206`, `flush_id`, `context_id`",
                "a clause's words, once the aligner has timed them: every word once, in order, before `done`"),
        Message("flush_done", "server", "`flush_done: true`, `flush_id` (from 1), `done: false`, `status_code: 206`, "
                "`context_id`", "a flush's audio is all sent"),
        Message("done", "server", "`done: true`, `status_code: 200`, `context_id`", "the context is spoken whole"),
        Message("error", "server", "`error` (its message), `status_code`, `done: true`, `context_id` (null if none)",
                "a message refused (bad JSON or values, an unknown voice, a cancel of an unknown context, binary "
                "data, ...) or a clause that failed; the socket and its other contexts go on"),
    ),
)  # fmt: skip


class VoiceSpecifier(BaseModel):
    model_config = ConfigDict(extra="ignore")

    mode: str = "id"
    id: str | None = None


class OutputFormat(BaseModel):
    model_config = ConfigDict(extra="ignore")

    container: str = "raw"
    encoding: str = "pcm_s16le"
    sample_rate: int = Field(default=24000, ge=8000, le=48000)

    def response_format(self, containers: Sequence[str]) -> str:
        """Our format for it; refused where its container is not served or does not hold its encoding."""
        if self.container not in containers:
            served = ", ".join(containers)
            raise InvalidInputError(
                f"output_format.container {shown(self.container)} is not served here: {served}", "output_format"
            )
        if self.container == "mp3":
            return "mp3"
        if self.encoding not in RAW_ENCODINGS:
            served = ", ".join(RAW_ENCODINGS)
            raise InvalidInputError(
                f"output_format.encoding {shown(self.encoding)} is not one of {served}", "output_format"
            )
        if self.container == "wav":
            if self.encoding != "pcm_s16le":
                raise InvalidInputError(
                    "a wav container holds pcm_s16le here: ask for raw for the others", "output_format"
                )
            return "wav"
        return RAW_ENCODINGS[self.encoding]

    def sent(self, audio: bytes) -> bytes:
        """Our audio (16-bit samples for the pcm encodings) as the client asked for it."""
        if self.container == "raw" and self.encoding == "pcm_f32le":
            return (np.frombuffer(audio, "<i2") / np.float32(32768)).astype("<f4").tobytes()
        return audio

    def seconds(self, audio: bytes) -> float:
        """How long our raw audio lasts."""
        return len(audio) / (2 if RAW_ENCODINGS[self.encoding] == "pcm" else 1) / self.sample_rate

    async def stream(self, audio: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        async for data in audio:
            yield self.sent(data)


class GenerationConfig(BaseModel):
    model_config = ConfigDict(extra="ignore")

    speed: float | None = Field(default=None, allow_inf_nan=False)


class GenerationRequest(BaseModel):
    """A generation: the body of `POST /tts/bytes` and `/tts/sse`, and every socket message but a cancel. Cartesia's
    other fields (`max_buffer_delay_ms`, `pronunciation_dict_id`, `use_normalized_timestamps`, emotions, volume)
    change nothing here and are ignored."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    model_id: str | None = None
    transcript: str = ""
    voice: VoiceSpecifier | None = None
    output_format: OutputFormat = OutputFormat()  # never changed: shared
    language: str | None = None
    generation_config: GenerationConfig | None = None
    add_timestamps: bool = False
    context_id: str | None = None
    continue_: bool = Field(default=False, alias="continue")
    flush: bool = False

    def fields(self, containers: Sequence[str] = EVENT_CONTAINERS) -> dict[str, Any]:
        """Its voice, model, language, format and speed as our speech request's fields."""
        voice = self.voice
        if voice is None or voice.mode != "id" or not voice.id:
            raise InvalidInputError('voice is {"mode": "id", "id": <a voice>}; embeddings are not served', "voice")
        fields: dict[str, Any] = {
            "voice": None if CARTESIA_VOICE.fullmatch(voice.id) else voice.id,  # None: the default voice
            "model": self.model_id,
            "language": language_of_code(self.language, "language") if self.language else None,
            "response_format": self.output_format.response_format(containers),
            "sample_rate": self.output_format.sample_rate,
        }
        if self.generation_config is not None and self.generation_config.speed is not None:
            fields["speed"] = self.generation_config.speed
        return fields


def chunk_message(context: str | None, data: bytes, step_time: float) -> dict[str, Any]:
    audio = base64.b64encode(data).decode()
    return {
        "type": "chunk",
        "context_id": context,
        "status_code": PARTIAL,
        "done": False,
        "data": audio,
        "step_time": step_time,
    }


def timestamps_message(
    context: str | None, text: str, start: float, end: float, words: Sequence[TimedWord] | None
) -> dict[str, Any]:
    """A spoken clause's words as written (`text` from `start` to `end` seconds), timed by the aligner's `words`;
    with None (they could not be timed) its time is shared by their lengths."""
    timed = written_words(text, words or [], start)
    if words is None:
        log.warning("context %s: a clause's words were not timed: spread over its audio by length", context)
        timed = timed_by_length([word.text for word in timed], start, end)
    stamps = {
        "words": [word.text for word in timed],
        "start": [round(word.start, 3) for word in timed],
        "end": [round(word.end, 3) for word in timed],
    }
    return {
        "type": "timestamps",
        "context_id": context,
        "status_code": PARTIAL,
        "done": False,
        "word_timestamps": stamps,
    }


def done_message(context: str | None) -> dict[str, Any]:
    return {"type": "done", "context_id": context, "status_code": COMPLETE, "done": True}


def error_message(message: str, status: int, context: str | None) -> dict[str, Any]:
    return {"type": "error", "context_id": context, "status_code": status, "done": True, "error": message}


def error_status(error: dict[str, Any]) -> int:
    """The status of one of the session's error objects (`error_body`), which name its kind, not its status."""
    return {"invalid_request_error": 400, "authentication_error": 401}.get(error["type"], 500)


async def sse_events(speech: SpeechOutput, fmt: OutputFormat, context: str | None) -> AsyncIterator[bytes]:
    """A generation as Cartesia's server-sent events: its chunks, each clause's words once timed, then `done`; a
    failure is an `error` in place of the rest."""

    def event(message: dict[str, Any]) -> bytes:
        return f"event: {message['type']}\ndata: {json.dumps(message, ensure_ascii=False)}\n\n".encode()

    last = time.perf_counter()
    try:
        async for data, timed in speech.with_times():
            if data:
                step, last = 1000 * (time.perf_counter() - last), time.perf_counter()
                yield event(chunk_message(context, fmt.sent(data), round(step, 1)))
            for part in timed:
                words = None if part.error is not None else part.words
                yield event(timestamps_message(context, part.text, part.start, part.end, words))
    except TTSError as exc:  # the headers are sent: the error becomes an event
        yield event(error_message(str(exc), exc.status, context))
        return
    yield event(done_message(context))


class CartesiaChannel:
    """One context's view of the socket: the session's audio and events as Cartesia's messages. A flush ends one of
    the session's utterances (its `done` becomes `flush_done`), the context's end the last (`done`); the words of
    each utterance, timed from its first audio, are moved on by the audio of the utterances before it."""

    def __init__(self, context: str, send: Send, fmt: OutputFormat, on_done: Callable[[], None]):
        self.context, self.send, self.fmt, self.on_done = context, send, fmt, on_done
        self.ends: deque[bool] = deque()  # each utterance end queued: True where it ends the context
        self.flush_id = 1  # of the audio being sent
        self.sent_seconds = 0.0
        self.origin = 0.0  # where the utterance playing began, in the context's audio
        self.last = time.perf_counter()

    @property
    def ending(self) -> bool:
        return bool(self.ends) and self.ends[-1]

    def stamp(self, message: dict[str, Any]) -> dict[str, Any]:
        return message | {"flush_id": self.flush_id}

    async def send_audio(self, data: bytes) -> None:
        now = time.perf_counter()
        self.sent_seconds += self.fmt.seconds(data)
        step, self.last = round(1000 * (now - self.last), 1), now
        await self.send(self.stamp(chunk_message(self.context, self.fmt.sent(data), step)))

    async def send_event(self, payload: dict) -> None:
        match payload.get("type"):
            case "segment.words":
                origin = self.origin
                words = [TimedWord(w["word"], origin + w["start"], origin + w["end"]) for w in payload["words"]]
                start, end = origin + payload["start"], origin + payload["end"]
                text, timed = payload["text"], None if "error" in payload else words
                await self.send(self.stamp(timestamps_message(self.context, text, start, end, timed)))
            case "done":
                self.origin = self.sent_seconds
                if self.ends.popleft():
                    await self.send(done_message(self.context))
                    self.on_done()
                else:
                    flushed = {"type": "flush_done", "context_id": self.context, "flush_done": True}
                    await self.send(self.stamp(flushed | {"status_code": PARTIAL, "done": False}))
                    self.flush_id += 1
            case "error":
                error = payload["error"]
                await self.send(error_message(error["message"], error_status(error), self.context))


def channel_of(session: RealtimeSession) -> CartesiaChannel:
    return cast(CartesiaChannel, session.channel)


class CartesiaSocket(ContextSocket):
    """One connection's contexts. `timestamps`: a ForcedAligner is hosted, so `add_timestamps` can be honoured."""

    def __init__(
        self, speech: SpeechService, send: Send, parse: RequestParser, max_pending_text: int, timestamps: bool
    ):
        super().__init__(send)
        self.speech, self.parse, self.max_pending_text, self.timestamps = speech, parse, max_pending_text, timestamps
        self.ended: deque[str] = deque(maxlen=ENDED_KEPT)

    async def handle(self, text: str | None) -> None:
        """One client message; a refused one is answered with an error naming its context, and the socket and its
        other contexts go on."""
        context: str | None = None
        try:
            message = json_message(text)
            named = message.get("context_id")
            if named is not None and not isinstance(named, str):
                raise InvalidInputError(f"context_id must be a string, not {shown(named)}", "context_id")
            context = named
            if message.get("cancel") is True:
                await self._cancel(context)
                return
            request = checked(GenerationRequest, message)
            context = context or str(uuid.uuid4())  # a context of one message
            await self._generate(context, request)
        except TTSError as exc:
            await self.send(error_message(str(exc), exc.status, context))

    async def _generate(self, context: str, request: GenerationRequest) -> None:
        transcript = request.transcript
        if len(transcript) > self.max_pending_text:  # never taken, however long one waits
            raise InvalidInputError(
                f"transcript is too long: {len(transcript)} characters, at most {self.max_pending_text}", "transcript"
            )
        session = self.contexts.get(context)
        if context in self.ended or session is not None and channel_of(session).ending:
            if transcript.strip():
                raise InvalidInputError(
                    f"context {shown(context)} has ended: a new context takes more text", "context_id"
                )
            return  # an end said twice
        if session is None:
            session = await self._open(context, request)
        self.contexts[context] = self.contexts.pop(context)  # the most recently used last
        if transcript:
            await session.append(joined(session, transcript))
        if request.flush:
            await self._end(session, final=False)
        if not request.continue_:
            await self._end(session, final=True)

    @staticmethod
    async def _end(session: RealtimeSession, final: bool) -> None:
        """End the session's utterance: a flush (`flush_done` after its audio), or the context's end (`done`)."""
        channel_of(session).ends.append(final)
        await session.commit(allow_empty=True)

    async def _open(self, context: str, request: GenerationRequest) -> RealtimeSession:
        config = request.fields() | {"timestamps": request.add_timestamps and self.timestamps}
        if len(self.contexts) >= MAX_CONTEXTS:
            self._drop_idle()
        channel = CartesiaChannel(context, self.send, request.output_format, lambda: self._finish(context))
        session = RealtimeSession(self.speech, channel, self.parse, self.max_pending_text, words_before_done=True)
        await self._enter(context, session, config)
        return session

    def _drop_idle(self) -> None:
        """Make room for a context: drop the least recently used one with nothing left to play."""
        idle = (name for name, session in self.contexts.items() if not channel_of(session).ends and session.idle)
        context = next(idle, None)
        if context is None:
            raise InvalidInputError(
                f"at most {MAX_CONTEXTS} contexts are open at once on a socket, and each is still speaking: end or "
                "cancel one first",
                "context_id",
            )
        self._finish(context)

    def _finish(self, context: str) -> None:
        self.ended.append(context)
        self._leave(context)

    async def _cancel(self, context: str | None) -> None:
        if context is None or context not in self.contexts and context not in self.ended:
            raise InvalidInputError(f"no context {shown(context)} to cancel", "context_id")
        session = self.contexts.pop(context, None)
        if session is not None:
            self.ended.append(context)
            await session.__aexit__(None, None, None)
