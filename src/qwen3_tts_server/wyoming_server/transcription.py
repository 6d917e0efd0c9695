"""Speech to text on a Wyoming connection, as Home Assistant asks for it: `transcribe` (the model's name, the
language, names and terms to listen for), then `audio-start`, `audio-chunk`s and `audio-stop`. The audio, at any
rate, width and channel count, is transcribed once it stops, and the text goes out as it is decoded:
`transcript-start`, a `transcript-chunk` for each piece of text, the whole `transcript`, then `transcript-stop`."""

from __future__ import annotations

import io
import wave
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from wyoming.asr import Transcribe, Transcript, TranscriptChunk, TranscriptStart, TranscriptStop
from wyoming.audio import AudioChunk, AudioStart
from wyoming.event import Event

from ..errors import InvalidInputError, PayloadTooLargeError
from ..model.asr.languages import language_code, resolve_language
from ..service.recognition import RecognitionService, TextDelta, TranscriptionRequest
from ..service.recognition import Transcript as FullTranscript
from ..service.routing import route_recognizer
from .backend import WyomingBackend


@dataclass
class Utterance:
    """One transcription under way on a connection: its settings from `transcribe`, its audio from `audio-start`
    and the chunks."""

    service: RecognitionService
    language: str | None
    context: str
    rate: int = 0
    width: int = 0
    channels: int = 0
    audio: bytearray = field(default_factory=bytearray)
    refused: bool = False  # its audio was refused (an error was sent): the rest of it is dropped


def start_utterance(backend: WyomingBackend, data: dict) -> Utterance:
    """A `transcribe` event's request, checked: its model routed as `model` is on the HTTP routes."""
    request = Transcribe.from_event(Event("transcribe", data))
    hosted = route_recognizer(backend.registry, request.name)
    language = resolve_language(request.language.replace("_", "-") if request.language else None)
    hints = ", ".join([*(request.transcript_names or []), *(request.transcript_terms or [])])  # the model's context
    return Utterance(backend.recognition[hosted.id], language, hints)


def open_audio(utterance: Utterance, data: dict) -> None:
    start = AudioStart.from_event(Event("audio-start", data))
    if start.width not in (1, 2, 3, 4) or start.rate <= 0 or start.channels <= 0:
        raise InvalidInputError(
            f"audio-start: unusable format {start.rate} Hz, {start.width} bytes, {start.channels} ch"
        )
    utterance.rate, utterance.width, utterance.channels = start.rate, start.width, start.channels


def add_audio(utterance: Utterance, event: Event) -> None:
    if utterance.refused:
        return
    utterance.refused = True  # until the chunk is taken
    chunk = AudioChunk.from_event(event)
    if (chunk.rate, chunk.width, chunk.channels) != (utterance.rate, utterance.width, utterance.channels):
        raise InvalidInputError("audio-chunk: its format differs from audio-start's")
    limit = utterance.service.max_bytes
    if len(utterance.audio) + len(chunk.audio) > limit:
        raise PayloadTooLargeError(f"the audio is larger than the {limit >> 20} MiB limit", param="audio")
    utterance.audio += chunk.audio
    utterance.refused = False


async def transcript_events(utterance: Utterance) -> AsyncIterator[Event]:
    """The transcript of an utterance whose audio has stopped, as Wyoming's streaming events (none for one whose
    audio was refused: its error was the answer)."""
    if utterance.refused:
        return
    request = TranscriptionRequest(wav_of(utterance), utterance.language, utterance.context, interactive=True)
    events = utterance.service.stream(request)
    try:
        first = await anext(events)  # unusable audio is refused before anything is sent
        yield TranscriptStart(language=language_code(utterance.language) if utterance.language else None).event()
        event = first
        while True:
            if isinstance(event, TextDelta):
                yield TranscriptChunk(event.text).event()
            elif isinstance(event, FullTranscript):
                heard = event.language.split(",")[0]
                yield Transcript(event.text, language=language_code(heard) if heard else None).event()
                yield TranscriptStop().event()
                return
            event = await anext(events)
    finally:
        await events.aclose()


def wav_of(utterance: Utterance) -> bytes:
    """The utterance's raw PCM as a WAV file, which the transcription reads as it reads an upload: one decoder
    (PyAV) turns every width, channel count and rate into the model's 16 kHz mono."""
    if not utterance.rate:
        raise InvalidInputError("audio-stop without audio-start")
    frame = utterance.width * utterance.channels
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(utterance.channels)
        out.setsampwidth(utterance.width)
        out.setframerate(utterance.rate)
        out.writeframes(bytes(utterance.audio[: len(utterance.audio) - len(utterance.audio) % frame]))
    return buffer.getvalue()
