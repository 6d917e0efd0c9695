"""Transcription of an uploaded recording through the recognition engine: the audio decoded off the event loop,
cut where the official package cuts long audio, its parts decoded side by side, and the text streamed in order as
it is decoded (`TextDelta`s) before the whole transcript (`Transcript`).

A part's text shows once its `language X<asr_text>` header is complete (at once when the language is forced),
and never ends on half a character (each token is decoded once, `StreamDecoder`); when the part ends, what the
official reading of its whole output adds follows (all of it for an output without the header tag). The
transcript is that reading of each part, its repetition collapse included, and the deltas add up to it: what is
shown is the collapse of the output so far, held back where more output could still collapse it
(`SettledCollapse`), so a loop of the model shows once, as the transcript has it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import cast

import numpy as np

from ...config import MAX_TRANSCRIPTION_BYTES, MAX_TRANSCRIPTION_SECONDS
from ...engine.jobs import RequestClock
from ...engine.recognition import DecodedToken, RecognitionEngine, TokenStream, TranscriptionJob
from ...errors import InvalidInputError
from ...model.asr.aligner import TimedWord
from ...model.asr.languages import resolve_language
from ...model.asr.long_audio import MAX_SECONDS, MAX_SECONDS_WITH_TIMESTAMPS, split_long_audio
from ...model.asr.mel import SAMPLE_RATE
from ...model.asr.transcriber import Transcriber, heard_wave
from ...model.asr.transcript import ASR_TEXT, SettledCollapse, joined_parts, parse_transcript
from ...model.text_tokenizer import TextTokenizer
from .live_slots import LiveSessionSlots

log = logging.getLogger(__name__)
NO_ALIGNER = (
    "word timestamps need a ForcedAligner hosted beside the transcriber (MODELS=...,Qwen/Qwen3-ForcedAligner-0.6B)"
)


# The model's context (a request's `prompt`: names, terms, the topic) is prefilled whole before the audio, at a
# cost that grows with its square: room for a long glossary, far from what would take the server's memory. Past
# MAX_CONTEXT_CHARACTERS (16 a token; English text has about 4) it is refused before it is tokenized.
MAX_CONTEXT_TOKENS = 1024
MAX_CONTEXT_CHARACTERS = 16 * MAX_CONTEXT_TOKENS


def check_context(transcriber: Transcriber, context: str, param: str = "prompt") -> None:
    """Refuse a context longer than MAX_CONTEXT_TOKENS tokens, or one holding the model's audio placeholder (which
    would take an audio row's place), naming the field it came in (`param`)."""
    limit = f"the model's context takes at most {MAX_CONTEXT_TOKENS} tokens and {MAX_CONTEXT_CHARACTERS} characters"
    if len(context) > MAX_CONTEXT_CHARACTERS:
        raise InvalidInputError(f"{param} is {len(context)} characters long; {limit}", param=param)
    tokens = transcriber.model.tokenizer.encode(context) if context else []
    if len(tokens) > MAX_CONTEXT_TOKENS:
        raise InvalidInputError(f"{param} is {len(tokens)} tokens long; {limit}", param=param)
    if (placeholder := transcriber.model.tokens.audio_pad) in tokens:
        text = transcriber.model.tokenizer.decode([placeholder])
        raise InvalidInputError(f"{param} holds {text}, the model's audio placeholder", param=param)


@dataclass(frozen=True)
class TranscriptionRequest:
    audio: bytes  # a recording in any format PyAV reads
    language: str | None = None  # a name or code (`resolve_language`); None: identified
    prompt: str = ""  # the model's context: names, terms, the topic
    interactive: bool = False  # a live caller: admitted before uploads
    max_new_tokens: int | None = None  # each part's budget (default: by its length)
    timestamps: bool = False  # word timestamps from the transcriber's ForcedAligner
    temperature: float = 0.0  # 0: greedy (the official decoding); above, sampled (each part from a random seed)
    logprobs: bool = False  # each transcript token's log probability
    languages: tuple[str, ...] = ()  # without `language`: one is forced; several allowed (`allowed_languages`)


@dataclass(frozen=True)
class TokenLogprob:
    """A transcript token: its text (empty for a token that only begins a character, whose text the next token
    completes), the UTF-8 bytes of that text, and its log probability."""

    token: str
    logprob: float
    bytes: tuple[int, ...]


@dataclass(frozen=True)
class TextDelta:
    text: str
    logprobs: tuple[TokenLogprob, ...] = ()  # of the tokens that made it, when asked for


@dataclass(frozen=True)
class TranscriptSegment:
    """One part of the recording: where it lies (seconds) and what was heard in it."""

    start: float
    end: float
    text: str
    tokens: tuple[int, ...]
    language: str  # the official name heard in it; "" when none
    words: tuple[TimedWord, ...] = ()  # with their times in the recording, when asked for


@dataclass(frozen=True)
class Transcript:
    language: str  # official names, in order ("Chinese,English"); "" when none was heard
    text: str
    seconds: float  # of audio
    tokens: int  # generated, every part's stop token included
    segments: tuple[TranscriptSegment, ...]  # one a part, in order
    cut_parts: tuple[int, ...] = ()  # the parts (from 1) that spent their token budget before the model ended them
    logprobs: tuple[TokenLogprob, ...] = ()  # every transcript token's, when asked for

    @property
    def truncated(self) -> bool:
        return bool(self.cut_parts)

    @property
    def parts(self) -> int:
        return len(self.segments)

    @property
    def words(self) -> list[TimedWord]:
        return [word for segment in self.segments for word in segment.words]


def visible_text(decoded: str, forced: bool) -> str:
    """What of a part's output decoded so far is transcript: all of it when the language is forced, else what
    follows the `<asr_text>` tag (nothing before it)."""
    if not forced:
        decoded = decoded.split(ASR_TEXT, 1)[1] if ASR_TEXT in decoded else ""
    return decoded.lstrip()


class _PartReader:
    """A part's tokens read as they come: deltas of its transcript's text, each with the log probabilities of the
    tokens that made it (when asked for: the transcript's tokens only, not the header or the stop token; an output
    without the header's tag is all text, as the official reading takes it)."""

    def __init__(self, tokenizer: TextTokenizer, forced: bool, logprobs: bool):
        self.decoder = tokenizer.stream_decoder(skip_special=True)
        self.collapse = SettledCollapse()
        self.forced, self.wants_logprobs = forced, logprobs
        self.ids: list[int] = []
        self.logprobs: list[TokenLogprob] = []
        self._before_tag: list[TokenLogprob] = []  # the header's, unless no tag ever ends it
        self.decoded = self.shown = ""
        self._unsent = 0  # logprobs not yet given with a delta

    def add(self, token: DecodedToken) -> TextDelta | None:
        self.ids.append(token.token)
        piece = self.decoder.step(token.token)
        in_text = self.forced or ASR_TEXT in self.decoded
        self.decoded += piece
        self.collapse.feed(piece)
        if self.wants_logprobs and token.finish_reason != "stop":
            item = TokenLogprob(piece, token.logprob, tuple(piece.encode()))
            (self.logprobs if in_text else self._before_tag).append(item)
        seen = visible_text(self.collapse.settled, self.forced)
        if len(seen) > len(self.shown) and seen.startswith(self.shown):
            return self._delta(seen)
        return None

    def finish(self, text: str) -> TextDelta | None:
        """What the official reading of the whole part adds (a part without its header tag is all text), with the
        log probabilities not given yet (an empty text for tokens whose text the repetition collapse took away)."""
        if not self.forced and ASR_TEXT not in self.decoded:
            self.logprobs = self._before_tag
        more = len(text) > len(self.shown)  # the text shown always begins it (`SettledCollapse`)
        return self._delta(text) if more or self._unsent < len(self.logprobs) else None

    def _delta(self, seen: str) -> TextDelta:
        delta = TextDelta(seen[len(self.shown) :], tuple(self.logprobs[self._unsent :]))
        self.shown, self._unsent = seen, len(self.logprobs)
        return delta


def allowed_languages(request: TranscriptionRequest) -> tuple[str | None, tuple[str, ...]]:
    """(the forced language, the languages allowed): `language` forces one; so does `languages` of one. Several
    `languages` leave the language to the model, and a part it hears in another is transcribed again, the first
    listed forced (the model forces one language, or none; its header names the language before any text, so the
    part is sent again before any of its text is shown)."""
    language = resolve_language(request.language)
    named = (resolve_language(value, param="languages") for value in request.languages)
    allowed = tuple(dict.fromkeys(name for name in named if name))
    if language or len(allowed) < 2:
        return language or (allowed[0] if allowed else None), ()
    return None, allowed


class RecognitionService:
    def __init__(
        self,
        engine: RecognitionEngine,
        request_timeout: float | None = None,
        max_new_tokens: int | None = None,
        max_bytes: int = MAX_TRANSCRIPTION_BYTES,
        max_seconds: float = MAX_TRANSCRIPTION_SECONDS,
        live_sessions: int = 0,
    ):
        self.engine = engine
        self.live_slots = LiveSessionSlots(live_sessions)  # its live sessions at once (0: no limit)
        self.request_timeout = request_timeout  # seconds for a whole request, all its parts
        self.max_new_tokens = max_new_tokens  # each part's budget unless a request sets one (default: by its length)
        self.max_bytes = max_bytes  # a recording's size: its callers (the routes, Wyoming) read it within this
        self.max_seconds = max_seconds  # a recording's longest duration
        self._aligning = threading.Lock()  # one alignment at a time, off the event loop beside the engine's thread

    async def transcribe(self, request: TranscriptionRequest, clock: RequestClock | None = None) -> Transcript:
        async for event in self.stream(request, clock):
            if isinstance(event, Transcript):
                return event
        raise AssertionError("a transcription stream ends with its transcript")

    async def stream(
        self, request: TranscriptionRequest, clock: RequestClock | None = None
    ) -> AsyncGenerator[TextDelta | TranscriptSegment | Transcript, None]:
        """Deltas of text as decoded, in order, each part's segment as it ends, then the transcript. Bad audio or
        settings raise before anything is queued; closing the iterator cancels every part still decoding. The
        request's time limit (`clock`, by default REQUEST_TIMEOUT from now) counts the decoding of its audio."""
        clock = clock or RequestClock(self.request_timeout)
        language, allowed = allowed_languages(request)
        too_long = f"this server transcribes at most {self.max_seconds:g} s (MAX_TRANSCRIPTION_SECONDS)"
        wave = await asyncio.to_thread(heard_wave, request.audio, "the file", "file", self.max_seconds, too_long)
        transcriber: Transcriber = await self.engine.models.get_async()
        check_context(transcriber, request.prompt)
        if request.timestamps:
            if transcriber.aligner is None:
                raise InvalidInputError(NO_ALIGNER, param="timestamp_granularities")
            transcriber.splitter.prepare(language or "")  # Korean without its word list: refused before any work
        parts = split_long_audio(wave, SAMPLE_RATE, MAX_SECONDS_WITH_TIMESTAMPS if request.timestamps else MAX_SECONDS)
        streams = self._submit(parts, language, request, clock)
        try:
            outputs: list[tuple[str, str]] = []
            segments: list[TranscriptSegment] = []
            cut_parts: list[int] = []
            logprobs: list[TokenLogprob] = []
            for index, (part, offset) in enumerate(parts):
                forced, checked = language, not allowed  # the part's forced language; its header checked
                reader = _PartReader(transcriber.model.tokenizer, bool(language), request.logprobs)
                async for token in _tokens(streams, index):
                    delta = reader.add(token)
                    if not checked and ASR_TEXT in reader.decoded:
                        checked, heard = True, parse_transcript(reader.decoded)[0]
                        if heard and heard not in allowed:
                            log.info("part %d was heard in %s, not in %s: transcribed in %s", index + 1, heard,
                                     ", ".join(allowed), allowed[0])  # fmt: skip
                            streams[index].cancel()
                            forced = allowed[0]
                            streams[index] = self._submit([(part, offset)], forced, request, clock, True)[0]
                            reader = _PartReader(transcriber.model.tokenizer, True, request.logprobs)
                            continue
                    if delta:
                        yield delta
                    if token.finish_reason == "length":
                        cut_parts.append(index + 1)
                        log.warning("part %d of %d spent its %d-token budget: its text may be cut", index + 1,
                                    len(parts), len(reader.ids))  # fmt: skip
                ids = reader.ids
                outputs.append(parse_transcript(transcriber.model.tokenizer.decode(ids, skip_special=True), forced))
                part_language, text = outputs[-1]
                if delta := reader.finish(text):
                    yield delta
                logprobs += reader.logprobs
                end = min(offset + len(part) / SAMPLE_RATE, len(wave) / SAMPLE_RATE)  # a short last part is padded
                words = (
                    await self._align(transcriber, part, text, part_language, offset, end) if request.timestamps else ()
                )
                segments.append(
                    TranscriptSegment(round(offset, 3), round(end, 3), text, tuple(ids), part_language, words)
                )
                yield segments[-1]
                if len(parts) > 1:
                    log.info("transcribed part %d of %d (%d tokens)", index + 1, len(parts), len(ids))
            language_heard, text = joined_parts(outputs)
            yield Transcript(
                language=language_heard,
                text=text,
                seconds=len(wave) / SAMPLE_RATE,
                tokens=sum(len(segment.tokens) for segment in segments),
                segments=tuple(segments),
                cut_parts=tuple(cut_parts),
                logprobs=tuple(logprobs),
            )
        finally:
            for stream in streams:
                stream.cancel()

    async def _align(
        self, transcriber: Transcriber, part: np.ndarray, text: str, language: str, offset: float, end: float
    ) -> tuple[TimedWord, ...]:
        """A part's words timed, none past the part's end (where the official aligner can put them)."""
        if not text.strip():
            return ()

        def align() -> list[TimedWord]:
            with self._aligning:
                return transcriber.align(part, text, language, offset)

        words = await asyncio.to_thread(align)
        last = round(end, 3)
        return tuple(TimedWord(word.text, min(word.start, last), min(word.end, last)) for word in words)

    def _submit(
        self,
        parts: list[tuple[np.ndarray, float]],
        language: str | None,
        request: TranscriptionRequest,
        clock: RequestClock,
        again: bool = False,
    ) -> list[TokenStream]:
        """Every part queued at once, in order, under one clock: a full queue refuses the request whole. A part sent
        `again` is a continuation: admitted first, never refused."""
        jobs = [
            TranscriptionJob(
                part,
                language,
                request.prompt,
                request.max_new_tokens or self.max_new_tokens,
                request.temperature,
                interactive=request.interactive,
                continuation=again,
            )
            for part, _ in parts
        ]
        return cast(list[TokenStream], self.engine.submit_in_order(jobs, clock))


async def _tokens(streams: list[TokenStream], index: int) -> AsyncGenerator[DecodedToken, None]:
    """A part's tokens, from the stream in `streams[index]` when each is asked for (a part sent again replaces it)."""
    while True:
        try:
            yield await anext(streams[index])
        except StopAsyncIteration:
            return
