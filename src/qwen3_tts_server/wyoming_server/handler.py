"""One Wyoming connection: `describe`, `synthesize`, and the streamed form (`synthesize-start`, `synthesize-chunk`s,
`synthesize-stop`), spoken by a RealtimeSession as the WebSocket's text is; and speech to text, `transcribe` with
the audio events (`transcription.py`).

Requests are answered in order. A `synthesize` gets audio-start, audio-chunks as the engine makes them (24 kHz,
16-bit mono) and audio-stop; a streamed synthesis the same, its first clause spoken while its text still arrives,
then synthesize-stopped. A refused request gets an `error` event (the API's message and error code) and still its
closing event (audio-stop, or synthesize-stopped), so that a client waiting for it is not left hanging; the
connection goes on. While a streamed synthesis is open, a `synthesize` is Home Assistant's copy of the same text
(sent for servers without streaming) and is ignored.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import Any

from wyoming.asr import Transcribe
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.event import Event, async_write_event
from wyoming.info import Describe
from wyoming.server import AsyncEventHandler
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeStopped

from ..errors import InvalidInputError, TTSError
from ..protocols import Message, WireProtocol
from ..service.realtime import DEFAULT_CONFIG, ChannelClosed, RealtimeSession, message_text
from .backend import WyomingBackend
from .info import describe
from .languages import model_language
from .refusals import error_event, refusal
from .transcription import Utterance, add_audio, close_audio, finish_audio, open_audio, start_utterance

log = logging.getLogger(__name__)

RATE, WIDTH, CHANNELS = 24000, 2, 1
OUTPUT = {"response_format": "pcm", "sample_rate": RATE}


WYOMING = WireProtocol(
    "Wyoming (Home Assistant)",
    "TCP WYOMING_PORT (serve --wyoming-port, or qwen3-tts-server wyoming)",
    "The wyoming library's events (a JSON header line, then the data and payload): text to speech, whole or streamed, "
    "and speech to text with transcript chunks while the audio still arrives.",
    (
        Message("describe", "client", "", "answered by `info`: the voices, the languages, the transcribers"),
        Message("synthesize", "client", "`text`, `voice` (`name`, `speaker`, `language`)", "speech for a whole text"),
        Message("synthesize-start", "client", "`voice`", "a streamed synthesis begins"),
        Message("synthesize-chunk", "client", "`text`", "more text; speech starts at the first clause"),
        Message("synthesize-stop", "client", "", "the streamed text is complete"),
        Message("transcribe", "client", "`name`, `language`, `transcript_names`, `transcript_terms`",
                "speech to text (the names and terms are the model's context): the audio follows"),
        Message("audio-start", "client", "`rate`, `width`, `channels`", "the audio to transcribe begins"),
        Message("audio-chunk", "client", "`rate`, `width`, `channels`, payload", "a piece of it"),
        Message("audio-stop", "client", "", "its end: the rest of the transcript follows"),
        Message("info", "server", "`tts`, `asr`", "what the server speaks and hears"),
        Message("audio-start", "server", "`rate`, `width`, `channels`", "speech begins (16-bit mono PCM)"),
        Message("audio-chunk", "server", "payload", "speech as it is made"),
        Message("audio-stop", "server", "", "a synthesis's speech is complete"),
        Message("synthesize-stopped", "server", "", "a streamed synthesis is complete"),
        Message("transcript-start", "server", "`language`", "a transcription's text begins"),
        Message("transcript-chunk", "server", "`text`", "text the later passes keep, only ever appended"),
        Message("transcript", "server", "`text`, `language`", "the whole transcript"),
        Message("transcript-stop", "server", "", "the transcription is complete"),
        Message("error", "server", "`text`, `code`", "an event refused; the connection goes on"),
    ),
)  # fmt: skip


class WyomingChannel:
    """The session's events on a Wyoming connection. An utterance's first audio opens it with audio-start, its
    audio goes out as audio-chunks, and its `done` is followed by its request's closing events; an error becomes
    an `error` event; the session's other events have no Wyoming form."""

    def __init__(self, writer: asyncio.StreamWriter):
        self.writer = writer
        self.audio_open = False
        # For each utterance in the session's queue, oldest first: the events written after its `done`.
        self.closings: deque[list[Event]] = deque()

    async def write(self, event: Event) -> None:
        try:
            await async_write_event(event, self.writer)
        except ConnectionError as exc:
            raise ChannelClosed from exc

    async def send_event(self, payload: dict) -> None:
        if payload["type"] == "error":
            await self.write(error_event(payload["error"]))
        elif payload["type"] == "done":
            self.audio_open = False
            closing = self.closings[0]
            while closing:  # `after_queued` may add to it while it is written
                await self.write(closing.pop(0))
            self.closings.popleft()

    async def send_audio(self, data: bytes) -> None:
        if not self.audio_open:
            await self.write(AudioStart(rate=RATE, width=WIDTH, channels=CHANNELS).event())
            self.audio_open = True
        await self.write(AudioChunk(rate=RATE, width=WIDTH, channels=CHANNELS, audio=data).event())

    def queued(self, closing: list[Event]) -> None:
        """An utterance was queued in the session: `closing` goes out after its `done`. Called as soon as the
        session returns it, before the session's sender can reach its end (nothing is awaited in between)."""
        self.closings.append(closing)

    async def after_queued(self, events: list[Event]) -> None:
        """Events written after the answers to the requests before them: now when none is still playing."""
        if self.closings:
            self.closings[-1].extend(events)
        else:
            for event in events:
                await self.write(event)


class WyomingHandler(AsyncEventHandler):
    """The events of one connection, answered through a RealtimeSession; leaving it (the client closed the
    connection, or the server stops) cancels every job the connection started, which frees their engine rows."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        backend: WyomingBackend,
        connections: set[asyncio.Task],
    ):
        super().__init__(reader, writer)
        self.backend = backend
        self.connections = connections
        self.channel = WyomingChannel(writer)
        self.session = RealtimeSession(backend.speech, self.channel, backend.parse, backend.max_pending_text)
        self.streaming = False  # between synthesize-start and synthesize-stop
        self.stream_refused = False  # its synthesize-start was refused: its text is dropped
        self.utterance: Utterance | None = None  # speech to text: from transcribe (or audio-start) to audio-stop

    async def run(self) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.connections.add(task)
        started = time.perf_counter()
        peer = self.writer.get_extra_info("peername")
        try:
            async with self.session:
                await super().run()
        except (ChannelClosed, ConnectionError):  # the client left while it was answered
            pass
        except (KeyError, TypeError, AttributeError) as exc:  # an event the library could not read: no way to go on
            log.warning("wyoming connection from %s closed: an unreadable event (%r)", peer, exc)
        finally:
            if self.utterance is not None:  # left mid-utterance: its session's work stops
                await close_audio(self.utterance)
            self.connections.discard(task)
            ms = round(1000 * (time.perf_counter() - started), 1)
            log.info("wyoming connection from %s closed", peer, extra={"peer": str(peer), "ms": ms})

    async def handle_event(self, event: Event) -> bool:
        """Answer one event; False (a failure the server logs) closes the connection."""
        try:
            if not isinstance(event.data, dict):
                raise InvalidInputError(f"the data of a {event.type!r} event must be an object")
            await self._handle(event)
        except TTSError as exc:
            await self.channel.after_queued([refusal(exc)])
        except ChannelClosed:
            raise
        except Exception:
            log.exception("wyoming: answering a %r event failed; the connection is closed", event.type)
            return False
        return True

    async def _handle(self, event: Event) -> None:
        if Describe.is_type(event.type):
            await self.channel.after_queued([(await describe(self.backend)).event()])
        elif Synthesize.is_type(event.type):
            if not self.streaming:
                await self._synthesize(event.data)
        elif SynthesizeStart.is_type(event.type):
            await self._start(event.data)
        elif SynthesizeChunk.is_type(event.type):
            if not self.streaming:
                raise InvalidInputError("synthesize-chunk outside a streamed synthesis: send synthesize-start first")
            if not self.stream_refused:
                await self.session.append(message_text(event.data))
        elif SynthesizeStop.is_type(event.type):
            await self._stop()
        elif Transcribe.is_type(event.type):
            if self.utterance is not None:  # a new request: what the last one held is dropped
                await close_audio(self.utterance)
            self.utterance = start_utterance(self.backend, event.data)
        elif AudioStart.is_type(event.type):
            self.utterance = self.utterance or start_utterance(self.backend, {})  # no transcribe: the defaults
            limits = self.backend.live_max_pending_seconds, self.backend.live_idle_timeout
            await open_audio(self.utterance, event.data, self.channel.after_queued, *limits)
        elif AudioChunk.is_type(event.type):
            if self.utterance is None or not self.utterance.rate:
                raise InvalidInputError("audio-chunk outside an utterance: send transcribe and audio-start first")
            add_audio(self.utterance, event)
        elif AudioStop.is_type(event.type):
            utterance, self.utterance = self.utterance, None
            if utterance is None:
                raise InvalidInputError("audio-stop without audio-start")
            await finish_audio(utterance)
        else:
            raise InvalidInputError(f"unknown event type {event.type!r}", param="type")

    async def _synthesize(self, data: dict) -> None:
        closing = [AudioStop().event()]
        try:
            await self.session.speak(request_config(data), message_text(data))
        except TTSError as exc:
            await self.channel.after_queued([refusal(exc), *closing])
        else:
            self.channel.queued(closing)

    async def _start(self, data: dict) -> None:
        if self.streaming:
            raise InvalidInputError("a streamed synthesis is open: end it with synthesize-stop first")
        self.streaming, self.stream_refused = True, False
        try:
            await self.session.update(request_config(data))  # the stream's voice, for its first text
        except TTSError:
            self.stream_refused = True
            raise

    async def _stop(self) -> None:
        closing = [SynthesizeStopped().event()]
        if not self.streaming:
            error = InvalidInputError("synthesize-stop without synthesize-start")
            await self.channel.after_queued([refusal(error), *closing])
            return
        self.streaming = False
        if self.stream_refused:  # its error was sent at synthesize-start
            await self.channel.after_queued(closing)
            return
        try:
            await self.session.commit()
        except TTSError as exc:
            await self.channel.after_queued([refusal(exc), *closing])
        else:
            self.channel.queued([AudioStop().event(), *closing])


def request_config(data: dict) -> dict[str, Any]:
    """The session config for a synthesize or synthesize-start: its voice (`speaker`, else `name`, else the API's
    default) and language (a code such as `en-US`, or a model name), as raw PCM at 24 kHz."""
    voice = data.get("voice") or {}
    if not isinstance(voice, dict):
        raise InvalidInputError("`voice` must be an object with `name`, `speaker` or `language`", param="voice")
    name = voice.get("speaker") or voice.get("name") or DEFAULT_CONFIG["voice"]
    return {"voice": name, "language": model_language(voice.get("language")), **OUTPUT}
