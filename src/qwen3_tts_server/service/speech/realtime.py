"""Real-time speech over a WebSocket (docs/websocket.md): session config, text split into clauses as it arrives,
one engine job per clause, audio sent strictly in clause order, and barge-in. A clause is prepared (checked,
normalised, tokenized) as soon as it is known; its engine job starts once it is at most `LOOKAHEAD_CLAUSES`
ahead of the clause playing, so the engine batches the next clauses while one is heard, and a long text (or a
client that stops reading) holds a few rows, never the engine's every row ahead of other requests.

The connection's reader calls `handle` for each client message (or, for a protocol of its own such as Wyoming's,
`update`, `append`, `commit` and `speak`) and never waits on generation; a sender task plays the queue of segments.
The session hands the channel structured events and audio; the channel puts them on its wire. A cancel stops the
sender, closes every job (the engine frees their rows within one step) and starts a fresh sender.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections import deque
from collections.abc import Callable
from contextlib import aclosing, suppress
from dataclasses import dataclass, field
from typing import Any, Protocol

from ...engine.jobs import Audience
from ...errors import InvalidInputError, PendingTextLimitError, TTSError, error_body, shown
from ...protocols import Message, WireProtocol, json_message
from ...text.language import detect_language
from ...text.segment import IncrementalSegmenter, speakable
from .alignment import SegmentTiming, TimedSegment
from .requests import SynthesisRequest
from .stream import SpeechOutput, usage
from .synthesis import SpeechService

log = logging.getLogger(__name__)

RAW_FORMATS = ("pcm", "mulaw", "alaw")  # headerless samples: segments join with nothing in between
CONFIG_FIELDS = frozenset(
    {
        "model",
        "voice",
        "language",
        "instructions",
        "response_format",
        "sample_rate",
        "speed",
        "temperature",
        "top_p",
        "top_k",
        "repetition_penalty",
        "seed",
        "normalize",
        "timestamps",
    }
)
DEFAULT_CONFIG = {"voice": "alloy", "response_format": "pcm"}
LEGACY_DONE = {"event": "done"}
MAX_MESSAGE_TEXT = 4096
_PROBE_TEXT = "probe"  # stands in for the text when a config is checked
LOOKAHEAD_CLAUSES = 2  # clauses whose engine jobs run ahead of the one playing
# Characters of an utterance's latest text that tell the language of a clause too short to tell its own: a long
# utterance is neither copied whole at each append nor detected whole at each such clause.
LANGUAGE_CONTEXT = MAX_MESSAGE_TEXT


class ChannelClosed(Exception):
    """The client's connection is gone."""


class Channel(Protocol):
    """The connection to the client: the session's events (the WebSocket's JSON messages) and its audio, each
    sent whole before the next; sending on a closed one raises ChannelClosed."""

    async def send_event(self, payload: dict) -> None: ...

    async def send_audio(self, data: bytes) -> None: ...


# The session config with one text as a synthesis request, validated as the HTTP API validates a body
# (the API layer supplies it; a bad value raises a TTSError naming the field).
RequestParser = Callable[[dict[str, Any], str], SynthesisRequest]


SPEECH_SOCKET = WireProtocol(
    "The speech WebSocket",
    "WS /v1/audio/speech/ws",
    "Text in as it arrives (an LLM's tokens), speech out from the first clause: JSON messages with a `type`, audio in "
    "binary frames. An untyped `{\"input\": ...}` message (the earlier server's) speaks it whole.",
    (
        Message("session.update", "client", "any of the config fields (voice, model, response_format, ...)",
                "checks and stores the config; answered by `session.updated`"),
        Message("input_text.append", "client", "`text`", "adds text to the open utterance (starting one)"),
        Message("input_text.commit", "client", "", "ends the utterance: the text not yet spoken is its last segment"),
        Message("input_text", "client", "`text`", "`input_text.append` then `input_text.commit`"),
        Message("cancel", "client", "", "barge-in: stops the audio and every job of the utterances under way"),
        Message("session.updated", "server", "`session`", "the effective config, with the actual `sample_rate`"),
        Message("segment.start", "server", "`utterance`, `segment`, `text`, `spoken_text`, `language`",
                "a segment's audio follows, in binary frames"),
        Message("segment.end", "server", "`utterance`, `segment`, `frames`", "the segment's audio is complete"),
        Message("segment.words", "server", "`utterance`, `segment`, `text`, `start`, `end`, `words` (each `word`, "
                "`start`, `end`: seconds from the utterance's first audio), `error` if they could not be timed",
                "with `timestamps` on: the segment's words, once the aligner has timed them (after its audio, "
                "possibly after later segments' audio or `done`)"),
        Message("done", "server", "`utterance`, `segments`, `usage`", "the utterance is spoken whole"),
        Message("cancelled", "server", "`utterance`", "the latest utterance a cancel covers (null before the first)"),
        Message("error", "server", "`error` (OpenAI's error object)", "a message refused; the session goes on"),
    ),
)  # fmt: skip


@dataclass(eq=False)
class Utterance:
    number: int
    config: dict[str, Any]  # the session config when its first text arrived
    clauses: int = 0  # handed to the engine, including those it refused
    segments: list[Segment] = field(default_factory=list)
    legacy: bool = False  # the earlier server's form: audio, then {"event": "done"}, nothing else
    timing: SegmentTiming | None = None  # with `timestamps`: its segments' words, offsets across its clauses
    text: str = ""  # its latest text (LANGUAGE_CONTEXT characters at most): the language of a clause too short to tell

    def done_event(self) -> dict:
        if self.legacy:
            return LEGACY_DONE
        used = usage(sum(s.speech.text_tokens for s in self.segments), sum(s.speech.frames for s in self.segments))
        return {"type": "done", "utterance": self.number, "segments": len(self.segments), "usage": used}


@dataclass(eq=False)
class Segment:
    utterance: Utterance
    number: int
    text: str
    speech: SpeechOutput  # prepared; its engine job starts within LOOKAHEAD_CLAUSES of the clause playing
    started: bool = False  # its engine job started (it counts in the session's `running`)
    refused: TTSError | None = None  # the engine refused its job when it came within reach


def error_event(exc: TTSError, legacy: bool = False) -> dict:
    """The OpenAI error envelope as an event; in the earlier server's form `{"event": "error", "detail": ...}`."""
    if legacy:
        return {"event": "error", "detail": str(exc)}
    return {"type": "error", "error": error_body(exc)}


def session_view(request: SynthesisRequest, sample_rate: int) -> dict[str, Any]:
    """The session config as `session.updated` reports it."""
    return {
        "model": request.model,
        "voice": request.voice,
        "language": request.language,
        "instructions": request.instructions,
        "response_format": request.response_format,
        "sample_rate": sample_rate,
        "speed": request.speed,
        **dataclasses.asdict(request.sampling),
        "normalize": request.normalize,
        "timestamps": request.timestamps,
    }


def parse_message(text: str | None) -> dict:
    message = json_message(text)
    if not (isinstance(message.get("type"), str) or is_legacy(message)):
        raise InvalidInputError("a message is a JSON object with a string `type`", param="type")
    return message


def is_legacy(message: dict) -> bool:
    """The earlier server's message: no `type`, the text in `input`, the config beside it."""
    return "type" not in message and "input" in message


def message_text(message: dict) -> str:
    text = message.get("text")
    if not isinstance(text, str):
        raise InvalidInputError("`text` must be a string", param="text")
    if len(text) > MAX_MESSAGE_TEXT:
        raise InvalidInputError(f"text is too long: {len(text)} characters, at most {MAX_MESSAGE_TEXT}", "text")
    return text


class RealtimeSession:
    """One connection's state. Use as `async with`: leaving cancels every job it started. At most
    `max_pending_text` characters wait to be spoken (in the segmenter and in segments not yet played): text past
    that is refused, and taken again once speech has caught up."""

    def __init__(
        self,
        speech: SpeechService,
        channel: Channel,
        parse: RequestParser,
        max_pending_text: int,
        words_before_done: bool = False,
    ):
        self.speech = speech
        self.channel = channel
        self.parse = parse
        self.max_pending_text = max_pending_text
        self.unplayed_text = 0  # characters of the segments queued or playing
        self.config: dict[str, Any] = dict(DEFAULT_CONFIG)
        self.splitter = IncrementalSegmenter()
        self.utterance: Utterance | None = None  # the one taking text
        self.started = 0  # utterances so far
        self.queue: asyncio.Queue[Segment | Utterance] = asyncio.Queue()  # an Utterance marks its end
        self.unstarted: deque[Segment] = deque()  # queued, their engine jobs not yet started
        self.running = 0  # segments whose jobs have started and that have not finished playing
        self.send_lock = asyncio.Lock()  # the reader's events and the sender's audio share the socket
        self.sender: asyncio.Task | None = None
        self.word_senders: set[asyncio.Task] = set()  # each sends a played segment's words once timed, in order
        self.last_words: asyncio.Task | None = None  # the latest of them: the next one waits for it
        self.words_before_done = words_before_done  # an utterance's `done` waits for its segments' words
        self.audience = Audience()  # the client, who hears the clauses in turn: the audio made ahead is bounded
        self.language: str | None = None  # the language last detected in a clause: a later one too short to tell

    async def __aenter__(self) -> RealtimeSession:
        self.sender = asyncio.create_task(self._play_queue())
        return self

    async def __aexit__(self, *_) -> None:
        await self._stop()

    async def handle(self, text: str | None) -> None:
        """One client message. A bad one is answered with an error event; the session goes on."""
        legacy = False
        try:
            message = parse_message(text)
            legacy = is_legacy(message)
            if legacy:
                await self._speak_legacy(message)
                return
            match message["type"]:
                case "session.update":
                    await self.update({name: value for name, value in message.items() if name != "type"})
                case "input_text.append":
                    await self.append(message_text(message))
                case "input_text.commit":
                    await self.commit()
                case "input_text":
                    await self.append(message_text(message))
                    await self.commit()
                case "cancel":
                    await self.cancel()
                case other:
                    raise InvalidInputError(f"unknown message type {shown(other)}", param="type")
        except TTSError as exc:
            await self._event(error_event(exc, legacy))

    async def report(self, exc: TTSError) -> None:
        """A message the connection refused before it reached the session, answered as the session's own are."""
        await self._event(error_event(exc))

    @property
    def idle(self) -> bool:
        """Nothing queued or playing (text held for a clause not yet finished aside)."""
        return self.queue.empty() and not self.unplayed_text

    async def drained(self) -> None:
        """Wait until everything queued has been played and its `done` sent (or the sender stopped)."""
        joined = asyncio.ensure_future(self.queue.join())
        try:
            await asyncio.wait([joined, self.sender], return_when=asyncio.FIRST_COMPLETED)
        finally:
            joined.cancel()

    # -- messages: each raises a TTSError for a request it refuses -------------------------------------

    async def update(self, fields: dict[str, Any]) -> None:
        """Check the new config as the HTTP API would; it applies from the next utterance on."""
        unknown = sorted(set(fields) - CONFIG_FIELDS)
        if unknown:
            raise InvalidInputError(f"unknown session field {unknown[0]!r}", param=unknown[0])
        config = {**self.config, **fields}
        request, rate = await self._check(config, _PROBE_TEXT)
        self.config = config
        await self._event({"type": "session.updated", "session": session_view(request, rate)})

    async def _check(self, config: dict[str, Any], text: str) -> tuple[SynthesisRequest, int]:
        """A config checked as the HTTP API would check it, with a raw format; the request and its output rate."""
        request = self.parse(config, text)
        if request.timestamps:
            await self.speech.timing()  # no ForcedAligner hosted: refused with the config
        if request.response_format not in RAW_FORMATS:
            raise InvalidInputError(
                f"response_format must be one of {', '.join(RAW_FORMATS)} on the WebSocket", param="response_format"
            )
        return request, await self.speech.check(request)

    def _make_room(self, text: str) -> None:
        """Refuse `text` when it would take the text waiting to be spoken past the limit."""
        pending = self.unplayed_text + len(self.splitter.pending)
        if pending + len(text) > self.max_pending_text:
            raise PendingTextLimitError(
                f"{pending} characters are waiting to be spoken and the limit is {self.max_pending_text}: "
                "this text was not taken; send it again once more audio has played",
                param="text",
            )

    async def append(self, text: str) -> None:
        """Text of the open utterance (one is opened with the session config), spoken clause by clause."""
        self._make_room(text)
        if self.utterance is None:
            self.utterance = Utterance(self.started, dict(self.config))
            self.started += 1
        self.utterance.text = (self.utterance.text + text)[-LANGUAGE_CONTEXT:]
        for clause in self.splitter.feed(text):
            if speakable(clause):  # an emoji or a mark alone between clauses has nothing to say
                await self._submit(self.utterance, clause)

    async def flush(self) -> None:
        """Speak the open utterance's text so far, though its clause is not finished; the utterance stays open."""
        rest = self.splitter.flush()
        if self.utterance is not None and speakable(rest):
            await self._submit(self.utterance, rest)

    async def commit(self, allow_empty: bool = False) -> None:
        """End the open utterance: its last clause is spoken, then its `done` event is sent. Queuing that end is
        the last thing it does: its caller runs on before the sender can reach it. `allow_empty`: with no text to
        speak, an empty utterance still ends, its `done` after the audio queued before it (a protocol that answers
        every flush); otherwise that is refused."""
        utterance, self.utterance = self.utterance, None
        rest = self.splitter.flush()
        if utterance is not None and speakable(rest):  # a trailing emoji alone has nothing to say
            await self._submit(utterance, rest)
        if utterance is None or not utterance.clauses:
            if not allow_empty:
                raise InvalidInputError("nothing to commit: the text is empty", param="text")
            if utterance is None:
                utterance = Utterance(self.started, dict(self.config))
                self.started += 1
        self.queue.put_nowait(utterance)

    async def _speak_legacy(self, message: dict) -> None:
        """The earlier server's message: its text spoken as one utterance with the config beside it (over the
        defaults, not the session's), answered with binary audio and `{"event": "done"}`."""
        fields = {name: value for name, value in message.items() if name != "input"}
        text = message["input"]
        if not isinstance(text, str):
            raise InvalidInputError("`input` must be a string", param="input")
        if self.utterance is not None:  # its audio would interleave with this one's
            raise InvalidInputError("an utterance is open: commit or cancel it before a message with `input`")
        await self.speak(fields, text, legacy=True)

    async def speak(self, fields: dict[str, Any], text: str, legacy: bool = False) -> None:
        """A whole text spoken as one utterance, its config `fields` over the defaults (not the session's): the
        config and the text are checked first (one error, before anything is spoken). `legacy`: the earlier
        server's form (audio, then `{"event": "done"}`), its text given as `input`. Queuing the utterance's end is
        the last thing it does: its caller runs on before the sender can reach it."""
        param = "input" if legacy else "text"
        config = {**DEFAULT_CONFIG, **fields}
        await self._check(config, text)
        self._make_room(text)
        utterance = Utterance(self.started, config, legacy=legacy, text=text[-LANGUAGE_CONTEXT:])
        self.started += 1
        splitter = IncrementalSegmenter()
        for clause in [*splitter.feed(text), splitter.flush()]:
            if speakable(clause):
                await self._submit(utterance, clause)
        if not utterance.clauses:
            raise InvalidInputError(f"nothing to speak: the {param} is empty", param=param)
        self.queue.put_nowait(utterance)

    async def cancel(self) -> None:
        """Barge-in: drop unsent audio and buffered text, cancel every job, and carry on with a fresh sender."""
        await self._stop()
        self.sender = asyncio.create_task(self._play_queue())
        await self._event({"type": "cancelled", "utterance": self.started - 1 if self.started else None})

    async def _submit(self, utterance: Utterance, text: str) -> None:
        """Prepare the clause now, and start its engine job once it is within reach of the one playing; the sender
        plays it in turn. A refusal met now (the text, a full queue for a job started at once) is reported at
        once."""
        utterance.clauses += 1
        try:
            request = await self._with_language(self.parse(utterance.config, text), utterance)
            if request.timestamps and utterance.timing is None:
                utterance.timing = await self.speech.timing(request.speed)
            speech = await self.speech.speak(request, start=False, timing=utterance.timing)
            start_now = self.running <= LOOKAHEAD_CLAUSES and not self.unstarted
            if start_now:
                self._start(speech, continuation=bool(utterance.segments))
        except TTSError as exc:
            await self._event(error_event(exc, utterance.legacy))
            return
        segment = Segment(utterance, len(utterance.segments), text, speech, started=start_now)
        utterance.segments.append(segment)
        if not start_now:
            self.unstarted.append(segment)
        self.queue.put_nowait(segment)
        self.unplayed_text += len(text)

    async def _with_language(self, request: SynthesisRequest, utterance: Utterance) -> SynthesisRequest:
        """A clause left to detection that is too short to tell ("+1 (555) 010-0199 ext." before "42, call before 5
        pm") takes its utterance's language as far as its text is known, else the language of the session's last
        clause: the model's Auto, left to guess from digits alone, could say it in another language."""
        if (request.language or "auto").lower() != "auto":
            return request
        own = await asyncio.to_thread(detect_language, request.text)
        language = own or await asyncio.to_thread(detect_language, utterance.text) or self.language
        self.language = language
        return request if own or language is None else dataclasses.replace(request, language=language)

    def _start(self, speech: SpeechOutput, continuation: bool) -> None:
        """Start a clause's engine job; a later clause of an utterance under way is a continuation (never refused
        for a full queue, admitted first), as a long HTTP request's next segment is."""
        speech.start(continuation=continuation, audience=self.audience)
        self.running += 1

    def _start_within_reach(self) -> None:
        """Start the jobs of the queued clauses that came within LOOKAHEAD_CLAUSES of the one playing."""
        while self.unstarted and self.running <= LOOKAHEAD_CLAUSES:
            segment = self.unstarted.popleft()
            try:
                self._start(segment.speech, continuation=segment.number > 0)
                segment.started = True
            except TTSError as exc:  # reported at its turn, in place of its audio
                segment.refused = exc

    async def _stop(self) -> None:
        """Stop the sender, close every job not yet played and forget the text of the open utterance."""
        self.unstarted.clear()  # first: the stopped sender starts none of them
        self.sender.cancel()
        for task in self.word_senders:
            task.cancel()
        await asyncio.wait([self.sender, *self.word_senders])
        self.word_senders.clear()
        self.last_words = None
        error = None if self.sender.cancelled() else self.sender.exception()
        if error is not None and not isinstance(error, ChannelClosed):
            log.error("the session's audio sender failed", exc_info=error)
        while not self.queue.empty():
            item = self.queue.get_nowait()
            self.queue.task_done()
            if isinstance(item, Segment):
                await item.speech.aclose()
        self.running = 0
        self.unplayed_text = 0
        self.utterance = None
        self.splitter = IncrementalSegmenter()

    # -- the sender ------------------------------------------------------------------------------------

    async def _play_queue(self) -> None:
        while True:
            item = await self.queue.get()
            try:
                if isinstance(item, Segment):
                    await self._play(item)
                else:
                    if self.words_before_done and self.last_words is not None:
                        await asyncio.wait([self.last_words])
                    await self._event(item.done_event())
            finally:
                self.queue.task_done()

    async def _play(self, segment: Segment) -> None:
        ids = {"utterance": segment.utterance.number, "segment": segment.number}
        legacy = segment.utterance.legacy  # audio only: no segment events
        try:
            spoken = segment.speech.segments
            language = ",".join(dict.fromkeys(part.language for part in spoken))
            text = {"text": segment.text, "spoken_text": " ".join(part.text for part in spoken), "language": language}
            if not legacy:
                await self._event({"type": "segment.start", **ids, **text})
            if segment.refused is not None:
                raise segment.refused
            async with aclosing(segment.speech.audio()) as audio:
                async for data in audio:
                    async with self.send_lock:
                        await self.channel.send_audio(data)
            if not legacy:
                await self._event({"type": "segment.end", **ids, "frames": segment.speech.frames})
            if segment.speech.timed and not legacy:
                task = asyncio.create_task(self._send_words(ids, segment.speech.timed, self.last_words))
                self.word_senders.add(task)
                self.last_words = task
                task.add_done_callback(self.word_senders.discard)
        except TTSError as exc:  # in place of segment.end
            await self._event(error_event(exc, legacy))
        finally:
            self.unplayed_text -= len(segment.text)
            await segment.speech.aclose()  # cancelled before its audio began
            if segment.started:
                self.running -= 1
                self._start_within_reach()

    async def _send_words(
        self, ids: dict[str, int], timed: list[asyncio.Task[TimedSegment]], previous: asyncio.Task | None
    ) -> None:
        """A played segment's words (of each of its parts) as one event, once the aligner has timed them and the
        segment before it has had its own."""
        parts = [await task for task in timed]
        if previous is not None:
            await asyncio.wait([previous])
        event: dict[str, Any] = {"type": "segment.words", **ids, "text": " ".join(part.text for part in parts)}
        event |= {"start": parts[0].start, "end": parts[-1].end}
        event["words"] = [word for part in parts for word in part.fields()["words"]]
        failed = next((part.error for part in parts if part.error is not None), None)
        if failed is not None:
            event["error"] = error_body(failed)
        with suppress(ChannelClosed):
            await self._event(event)

    async def _event(self, payload: dict) -> None:
        async with self.send_lock:
            await self.channel.send_event(payload)
