"""Speech to text on a Wyoming connection, as Home Assistant asks for it: `transcribe` (the model's name, the
language, names and terms to listen for), then `audio-start`, `audio-chunk`s and `audio-stop`. The audio, at any
rate, width and channel count, is transcribed as it arrives, by a live session (`service/recognition/live.py`,
the official streaming algorithm; no voice activity: the client's `audio-stop` ends the utterance). Text that later
passes keep goes out while the audio still arrives: `transcript-start`, then a `transcript-chunk` for each piece
(only ever appended), and after `audio-stop` the rest, the whole `transcript`, then `transcript-stop`. Audio that
stops arriving for LIVE_IDLE_TIMEOUT seconds before `audio-stop` ends the utterance's session (an `idle_timeout`
error, its slot given back, the rest of its audio dropped); the connection goes on."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from wyoming.asr import Transcribe, Transcript, TranscriptChunk, TranscriptStart, TranscriptStop
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.event import Event

from ..audio.decoding import pcm_samples
from ..errors import IdleTimeoutError, InvalidInputError, PayloadTooLargeError, TTSError
from ..model.asr.languages import language_code, resolve_language
from ..service.recognition.live import LiveSession, LiveTranscript, PassFailed, cancelled
from ..service.recognition.routing import route_recognizer
from ..service.recognition.transcription import RecognitionService, check_context
from .backend import WyomingBackend
from .refusals import refusal

Write = Callable[[list[Event]], Awaitable[None]]
HINTS = "transcript_names and transcript_terms"


@dataclass
class Utterance:
    """One transcription under way on a connection: its settings from `transcribe`, its audio's format from
    `audio-start`, and the live session its chunks go to."""

    service: RecognitionService
    language: str | None
    context: str
    rate: int = 0
    width: int = 0
    channels: int = 0
    received: int = 0  # audio bytes
    refused: bool = False  # its audio was refused (an error was sent): the rest of it is dropped
    session: LiveSession | None = None
    forwarder: asyncio.Task | None = None
    heard_at: float = 0.0  # when audio last came (time.monotonic)
    watchdog: asyncio.Task | None = None  # ends the session when the audio stops coming (LIVE_IDLE_TIMEOUT)


async def start_utterance(backend: WyomingBackend, data: dict) -> Utterance:
    """A `transcribe` event's request, checked: its model routed as `model` is on the HTTP routes; its names and
    terms (the model's context) bounded as a `prompt` is."""
    request = Transcribe.from_event(Event("transcribe", data))
    hosted = route_recognizer(backend.registry, request.name)
    language = resolve_language(request.language.replace("_", "-") if request.language else None)
    given = (request.transcript_names or [], request.transcript_terms or [])
    if not all(isinstance(hints, list) and all(isinstance(hint, str) for hint in hints) for hints in given):
        raise InvalidInputError(f"transcribe: {HINTS} are lists of strings", param="transcript_names")
    service = backend.recognition[hosted.id]
    context = ", ".join([*given[0], *given[1]])
    check_context(await service.engine.models.get_async(), context, HINTS)
    return Utterance(service, language, context)


async def open_audio(
    utterance: Utterance, data: dict, write: Write, max_pending_seconds: float, idle_timeout: float = 0.0
) -> None:
    """The audio's format, and its live session (its text written with `write` as it is decoded)."""
    start = AudioStart.from_event(Event("audio-start", data))
    if start.width not in (1, 2, 3, 4) or start.rate <= 0 or start.channels <= 0:
        raise InvalidInputError(
            f"audio-start: unusable format {start.rate} Hz, {start.width} bytes, {start.channels} ch"
        )
    if not 8000 <= start.rate <= 48000:
        raise InvalidInputError(f"audio-start: {start.rate} Hz; the rate is from 8000 to 48000 Hz")
    await close_audio(utterance)  # a second audio-start: what the first held is dropped
    utterance.rate, utterance.width, utterance.channels = start.rate, start.width, start.channels
    utterance.received, utterance.refused = 0, False
    service = utterance.service
    session = LiveSession(
        service.engine,
        start.rate,
        utterance.language,
        utterance.context,
        None,
        max_pending_seconds,
        slots=service.live_slots,
    )
    try:
        utterance.session = await session.start()
    except TTSError:  # every live session slot taken, or the model could not load: its chunks are dropped
        utterance.refused = True
        raise
    utterance.forwarder = asyncio.create_task(_forward(utterance, session, write))
    utterance.heard_at = time.monotonic()
    if idle_timeout:
        utterance.watchdog = asyncio.create_task(_end_when_idle(utterance, session, write, idle_timeout))


def add_audio(utterance: Utterance, event: Event) -> None:
    if utterance.refused:
        return
    utterance.refused = True  # until the chunk is taken
    chunk = AudioChunk.from_event(event)
    if (chunk.rate, chunk.width, chunk.channels) != (utterance.rate, utterance.width, utterance.channels):
        raise InvalidInputError("audio-chunk: its format differs from audio-start's")
    limit = utterance.service.max_bytes
    if utterance.received + len(chunk.audio) > limit:
        raise PayloadTooLargeError(f"the audio is larger than the {limit >> 20} MiB limit", param="audio")
    assert utterance.session is not None
    utterance.session.append(pcm_samples(chunk.audio, utterance.width, utterance.channels))
    utterance.received += len(chunk.audio)
    if chunk.audio:  # (an empty chunk is no audio: `_end_when_idle`)
        utterance.heard_at = time.monotonic()
    utterance.refused = False


async def finish_audio(utterance: Utterance) -> None:
    """`audio-stop`: the utterance's last pass, then its transcript (nothing for one whose audio was refused: its
    error was the answer)."""
    if utterance.refused:
        await close_audio(utterance)
        return
    if utterance.session is None:
        raise InvalidInputError("audio-stop without audio-start")
    await cancelled(utterance.watchdog)  # the client now waits for the transcript
    utterance.session.commit()
    await utterance.session.close()
    if utterance.forwarder is not None:
        await utterance.forwarder


async def close_audio(utterance: Utterance) -> None:
    """Stop the utterance's session at once (the client left, or started over)."""
    if utterance.session is not None:
        await utterance.session.cancel()
    await cancelled(utterance.forwarder)
    await cancelled(utterance.watchdog)
    utterance.session = utterance.forwarder = utterance.watchdog = None


async def _end_when_idle(utterance: Utterance, session: LiveSession, write: Write, timeout: float) -> None:
    """Cancel the session once no audio came for `timeout` seconds; its audio-stop then ends nothing."""
    while (left := utterance.heard_at + timeout - time.monotonic()) > 0:
        await asyncio.sleep(left)
    utterance.refused = True
    await session.cancel()
    idle = IdleTimeoutError(f"no audio for {timeout:g} s (LIVE_IDLE_TIMEOUT): the utterance is dropped")
    await write([refusal(idle)])


async def _forward(utterance: Utterance, session: LiveSession, write: Write) -> None:
    """The session's transcripts as Wyoming's streaming events; a failed pass as an error event."""
    sent, started = "", False
    while (event := await session.events.get()) is not None:
        if isinstance(event, TTSError | PassFailed):
            await write([refusal(event if isinstance(event, TTSError) else event.error)])
            continue
        if not isinstance(event, LiveTranscript):
            continue
        events = []
        if not started:
            forced = language_code(utterance.language) if utterance.language else None
            events.append(TranscriptStart(language=forced).event())
        if event.settled.startswith(sent) and len(event.settled) > len(sent):
            events.append(TranscriptChunk(event.settled[len(sent) :]).event())
            sent = event.settled
        if event.final:
            heard = event.language.split(",")[0]
            events += [Transcript(event.text, language=language_code(heard) if heard else None).event()]
            events.append(TranscriptStop().event())
        if len(events) > (0 if started else 1):  # a transcript-start alone waits for its first text
            started = True
            await write(events)


class Transcription:
    """A connection's speech-to-text events: `transcribe`, then the audio events of its utterance."""

    def __init__(self, backend: WyomingBackend, write: Write):
        self.backend, self.write = backend, write
        self.utterance: Utterance | None = None  # from transcribe (or audio-start) to audio-stop

    async def handle(self, event: Event) -> bool:
        """Answer `event` if it is a speech-to-text event; False if it is not one."""
        if Transcribe.is_type(event.type):
            await self.close()  # a new request: what the last one held is dropped
            self.utterance = await start_utterance(self.backend, event.data)
        elif AudioStart.is_type(event.type):
            self.utterance = self.utterance or await start_utterance(self.backend, {})  # no transcribe: the defaults
            limits = self.backend.live_max_pending_seconds, self.backend.live_idle_timeout
            await open_audio(self.utterance, event.data, self.write, *limits)
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
            return False
        return True

    async def close(self) -> None:
        """The utterance under way, if any, stops (the client left mid-utterance, or began another)."""
        if self.utterance is not None:
            utterance, self.utterance = self.utterance, None
            await close_audio(utterance)
