"""Text to speech on a Wyoming connection: `synthesize`, and the streamed form (`synthesize-start`,
`synthesize-chunk`s, `synthesize-stop`), spoken by a RealtimeSession as the WebSocket's text is
(`service/speech/realtime.py`).

A `synthesize` gets audio-start, audio-chunks as the engine makes them (24 kHz, 16-bit mono) and audio-stop; a
streamed synthesis the same, its first clause spoken while its text still arrives, then synthesize-stopped. A
refused request gets an `error` event and still its closing event (audio-stop, or synthesize-stopped), so that a
client waiting for it is not left hanging. While a streamed synthesis is open, a `synthesize` is Home Assistant's
copy of the same text (sent for servers without streaming) and is ignored.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.event import Event, async_write_event
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeStopped

from ..errors import InvalidInputError, TTSError
from ..service.speech.realtime import DEFAULT_CONFIG, ChannelClosed, RealtimeSession, message_text
from .backend import WyomingBackend
from .languages import model_language
from .refusals import error_event, refusal

RATE, WIDTH, CHANNELS = 24000, 2, 1
OUTPUT = {"response_format": "pcm", "sample_rate": RATE}


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


class Synthesis:
    """A connection's synthesis events, answered through its RealtimeSession in order."""

    def __init__(self, backend: WyomingBackend, channel: WyomingChannel):
        self.channel = channel
        self.session = RealtimeSession(backend.speech, channel, backend.parse, backend.max_pending_text)
        self.streaming = False  # between synthesize-start and synthesize-stop
        self.stream_refused = False  # its synthesize-start was refused: its text is dropped

    async def handle(self, event: Event) -> bool:
        """Answer `event` if it is a synthesis event; False if it is not one."""
        if Synthesize.is_type(event.type):
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
        else:
            return False
        return True

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
