"""A live recognition session: audio in as it arrives (float samples at any rate), a partial transcript after every
pass of the official streaming algorithm (`model/asr/streaming.py`) and a final one at the end of each utterance.

An utterance ends when the client commits it or, with voice activity on (`audio/voice_activity.py`), when speech
stops; the next one starts a fresh window, so a session of any length costs the same per chunk. A commit takes all
the utterance's audio so far, and speech going on at a commit goes on in the next utterance at once. An utterance
that reaches `max_utterance_seconds` (MAX_SECONDS: the longest audio the model transcribes in one piece) ends there
as if committed, the next taking the audio that follows: none is dropped. With voice
activity on, audio outside speech costs no recognition work: an utterance starts where speech starts (its prefix
padding included) and holds the audio heard until the silence that ends it is confirmed.

Two tasks share the work: one listens (voice activity, where utterances begin and end, their `SpeechBoundary` and
`Committed` events), never waiting for a pass, so those events leave as soon as their audio is heard; the other
transcribes, each utterance's passes in order, one at a time, then its final. Each pass runs in the recognition
engine beside uploads and other sessions, admitted before uploads; the audio waiting for passes is bounded
(`max_pending_seconds`, then `PendingAudioLimitError`): nothing is dropped. A session holds one of its
transcriber's slots while it runs (`live_session_slots.py`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import soxr

from ...audio.voice_activity import VoiceActivity, VoiceActivitySettings
from ...engine.recognition import TRANSCRIPTION_FAILED, RecognitionEngine, TranscriptionJob
from ...errors import PendingAudioLimitError, TranscriptionFailedError, TTSError
from ...model.asr.long_audio import MAX_SECONDS
from ...model.asr.mel import SAMPLE_RATE
from ...model.asr.streaming import IncrementalPasses, LiveUtterance, Pass, PromptHead, StreamingSettings
from ...model.asr.transcriber import Transcriber
from .live_slots import LiveSessionSlots
from .transcription import visible_text

log = logging.getLogger(__name__)
KEPT_BEYOND_PADDING = 1.0  # seconds of audio outside speech kept beyond the prefix padding, for the next start


async def cancelled(task: asyncio.Task | None) -> None:
    """Cancel `task` (if any) and wait until it has ended."""
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@dataclass(frozen=True)
class LiveTranscript:
    """An utterance's transcription so far (`final`: its last)."""

    utterance: int  # 0 for the session's first
    text: str
    language: str
    final: bool
    settled: str = ""  # the text's beginning that later passes keep (a partial's; a final's is all of it)
    heard_until: float = 0.0  # seconds into the session's audio where the audio this transcription heard ends
    failure: TTSError | None = None  # a final's last pass failed: its text misses the audio that pass was to add
    start: float = 0.0  # seconds into the session's audio where the utterance begins


@dataclass(frozen=True)
class PassFailed:
    """A pass of an utterance failed; the utterance goes on as before it (a later pass hears its audio again)."""

    utterance: int
    error: TTSError


@dataclass(frozen=True)
class SpeechBoundary:
    """Voice activity: speech started or stopped, `seconds` into the session's audio."""

    utterance: int
    kind: Literal["started", "stopped"]
    seconds: float


@dataclass(frozen=True)
class Committed:
    """An utterance ended (a commit, or speech stopped): its final transcript follows."""

    utterance: int
    seconds: float  # its audio's length
    by_commit: bool = False  # ended by the client's commit (not by voice activity, its length or the session's end)


@dataclass(frozen=True)
class CommitRefused:
    """A commit found less audio than it asked for since the last utterance ended: nothing changed."""

    seconds: float  # the audio there was


# TTSError: the session failed and ends (nothing more follows)
LiveEvent = LiveTranscript | SpeechBoundary | Committed | CommitRefused | PassFailed | TTSError


@dataclass(eq=False)
class _Segment:
    """An utterance as the listening task cuts it, for the transcribing task: its audio in pieces, then its end."""

    index: int
    language: str | None
    context: str
    start: int  # where in the session's 16 kHz audio it begins
    by_commit: bool = False  # begun by a commit within speech (not where speech started)
    given: int = 0  # samples handed over
    dropped: bool = False  # cleared, or begun by a commit and found to hold no speech: nothing more is sent
    failure: TTSError | None = None  # its last pass failed


class LiveSession:
    """One live stream. `append` audio, `commit` to end the utterance, `clear` to drop it, `close` at the end; read
    `events` (a queue ending with None after `close`)."""

    def __init__(
        self,
        engine: RecognitionEngine,
        rate: int = SAMPLE_RATE,
        language: str | None = None,
        context: str = "",
        voice_activity: VoiceActivitySettings | None = None,
        max_pending_seconds: float = 30.0,
        streaming: StreamingSettings | None = None,
        slots: LiveSessionSlots | None = None,
    ):
        self.engine, self.rate, self.language, self.context = engine, rate, language, context
        self.voice_activity = VoiceActivity(voice_activity) if voice_activity is not None else None
        self._heard_from = 0  # where in the session the voice activity's own sample 0 is
        self.max_pending_seconds = max_pending_seconds
        self.streaming = streaming or StreamingSettings()
        self.events: asyncio.Queue[LiveEvent | None] = asyncio.Queue()
        self.utterances = 0  # utterances begun
        self.max_utterance_seconds = MAX_SECONDS
        self._actions: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self._pending_samples = 0  # appended at `rate`, not yet taken by the listening task
        self._resampler = self._new_resampler()
        # listening
        self._audio = np.zeros(0, np.float32)  # the session's recent 16 kHz audio, from sample `_base`
        self._base = 0
        self._given = 0  # audio up to here is the current utterance's (or was left out of any)
        self._buffer_from = 0  # audio from here is in no utterance that ended (what a commit takes)
        self._ends_at: int | None = None  # where the current utterance ends, once voice activity found its end
        self._segment: _Segment | None = None
        self._segments: asyncio.Queue[tuple[_Segment, np.ndarray | None] | None] = asyncio.Queue()
        self._queued = 0  # 16 kHz samples handed to the transcribing task, not yet taken
        # transcribing
        self._transcriber: Transcriber | None = None
        self._current: _Segment | None = None
        self._utterance: LiveUtterance | None = None
        self._passes: IncrementalPasses | None = None
        self._head: PromptHead | None = None  # the last utterance's prompt head, for the next of its context
        self._worker: asyncio.Task | None = None
        self._slots = slots  # the transcriber's, one held from `start` until the session ends
        self._holds_slot = False

    def _new_resampler(self) -> soxr.ResampleStream | None:
        return soxr.ResampleStream(self.rate, SAMPLE_RATE, 1, quality="HQ") if self.rate != SAMPLE_RATE else None

    async def start(self) -> LiveSession:
        """Take one of the transcriber's session slots (LiveSessionLimitError when none is free), load the model if
        needed, then take audio."""
        if self._slots is not None:
            self._slots.take()
            self._holds_slot = True
        try:
            self._transcriber = await self.engine.models.get_async()
        except BaseException:
            self._give_back_slot()
            raise
        self._worker = asyncio.create_task(self._work())
        self._worker.add_done_callback(lambda _: self._give_back_slot())  # however it ends, started or not
        return self

    def _give_back_slot(self) -> None:
        if self._holds_slot and self._slots is not None:
            self._holds_slot = False
            self._slots.give_back()

    def append(self, samples: np.ndarray) -> None:
        """Queue mono float samples at the session's rate. Past `max_pending_seconds` waiting: refused, the session
        going on with what it holds."""
        waiting = (self._pending_samples + len(samples)) / self.rate + self._queued / SAMPLE_RATE
        if waiting > self.max_pending_seconds:
            raise PendingAudioLimitError(
                f"audio arrives faster than it is transcribed: {self.max_pending_seconds:g} s already wait"
            )
        self._pending_samples += len(samples)
        self._actions.put_nowait(("audio", np.asarray(samples, np.float32)))

    def commit(self, min_seconds: float = 0.0) -> None:
        """End the current utterance with all its audio so far: `Committed`, then its final transcript after its
        last pass (with no audio, a final of no text). With `min_seconds`, a commit of the audio itself: less than
        that since the last utterance ended is `CommitRefused` instead, and nothing changes; where voice activity
        heard no speech since, the utterance is the audio kept since then (its last `KEPT_BEYOND_PADDING` seconds
        and prefix padding)."""
        self._actions.put_nowait(("commit", min_seconds))

    def configure(self, language: str | None, context: str, voice_activity: VoiceActivitySettings | None) -> None:
        """From the next utterance on: the forced language (None: identified), the context (the model's prompt),
        and voice activity (None: off)."""
        self._actions.put_nowait(("configure", (language, context, voice_activity)))

    def clear(self) -> None:
        """Drop the current utterance's audio, passed and pending (no final is sent for it)."""
        self._actions.put_nowait(("clear", None))

    async def close(self) -> None:
        """Commit what is held, wait for its final transcript, and end `events`."""
        self._actions.put_nowait(("close", None))
        if self._worker is not None:
            await asyncio.shield(self._worker)
        self._give_back_slot()

    async def cancel(self) -> None:
        """Stop at once (the client left): nothing more is sent."""
        await cancelled(self._worker)
        self._give_back_slot()

    # -- listening: one action at a time, in order, never waiting for a pass ------------------------------------

    async def _work(self) -> None:
        transcribing = asyncio.create_task(self._transcribe())
        transcribing.add_done_callback(self._transcribing_ended)
        try:
            while True:
                action, value = await self._actions.get()
                if action == "audio":
                    self._pending_samples -= len(value)
                    self._hear(self._resampled(value, last=False))
                elif action == "clear":
                    if self._segment is not None:
                        self._segment.dropped = True
                    self._segment, self._ends_at = None, None
                    self._given = self._buffer_from = self._base + len(self._audio)
                elif action == "configure":
                    self.language, self.context, activity = value
                    self.voice_activity = VoiceActivity(activity) if activity is not None else None
                    self._heard_from = self._base + len(self._audio)
                elif action == "failed":
                    await transcribing  # raises what ended it
                else:
                    self._hear(self._resampled(np.zeros(0, np.float32), last=True))
                    self._resampler = self._new_resampler()
                    if action == "commit":
                        self._commit(value)
                    else:
                        self._end_segment()
                        self._segments.put_nowait(None)
                        await transcribing
                        return
        except Exception:
            log.exception("a live session failed")
            self._emit(TranscriptionFailedError(TRANSCRIPTION_FAILED))
        finally:
            if not transcribing.done():  # (one that failed was awaited above)
                await cancelled(transcribing)
            self.events.put_nowait(None)

    def _transcribing_ended(self, task: asyncio.Task) -> None:
        if not task.cancelled() and task.exception() is not None:
            self._actions.put_nowait(("failed", None))

    def _resampled(self, samples: np.ndarray, last: bool) -> np.ndarray:
        if self._resampler is None:
            return samples
        return self._resampler.resample_chunk(samples, last=last).astype(np.float32, copy=False)

    def _hear(self, samples: np.ndarray) -> None:
        """Voice activity over the new audio, and the utterance given what is its."""
        start = self._base + len(self._audio)
        self._audio = np.concatenate([self._audio, samples])
        boundaries = self.voice_activity.feed(samples) if self.voice_activity is not None else []
        if self.voice_activity is None and self._segment is None and len(samples):
            self._begin(start)
        for boundary in boundaries:
            sample = self._heard_from + boundary.sample
            if boundary.kind == "started":
                if self._ends_at is not None:  # the last one's end padding yields to this start, where not yet given
                    self._ends_at = max(min(self._ends_at, sample), self._given)
                self._end_segment()  # one left open by its end's padding or a change of settings ends first
                self._begin(max(sample, self._base, self._given))
                self._emit(SpeechBoundary(self.utterances - 1, "started", sample / SAMPLE_RATE))
            elif (segment := self._segment) is not None:  # (none when the client cleared it meanwhile)
                if segment.by_commit and self._heard_from + boundary.quiet_from <= segment.start:
                    # begun by a commit after the speech had gone quiet: it holds none of it
                    segment.dropped, self._segment = True, None
                    self._emit(SpeechBoundary(segment.index - 1, "stopped", sample / SAMPLE_RATE))
                    continue
                self._give(min(sample, self._heard_from + boundary.found))
                self._emit(SpeechBoundary(segment.index, "stopped", sample / SAMPLE_RATE))
                # the end's padding may reach past where it was found: the utterance waits for all of it (or the
                # next start), whatever pieces the audio comes in
                self._ends_at = sample
        if self._segment is not None:
            if self._ends_at is None:
                self._give(start + len(samples))
            elif start + len(samples) >= self._ends_at:
                self._end_segment()
        if self._segment is not None:
            drop = self._given - self._base  # all given
        else:  # outside speech: the last seconds kept for the next utterance's prefix padding
            padding = self.voice_activity.settings.prefix_padding_ms / 1000 if self.voice_activity is not None else 0
            kept = int((padding + KEPT_BEYOND_PADDING) * SAMPLE_RATE)
            drop = max(len(self._audio) - kept, self._given - self._base, 0)
        self._audio, self._base = self._audio[drop:], self._base + drop

    def _commit(self, min_seconds: float) -> None:
        """The client's end of the utterance: all its audio so far, whatever voice activity says; speech going on
        goes on in the next one at once."""
        now = self._base + len(self._audio)
        if now - self._buffer_from < min_seconds * SAMPLE_RATE:
            self._emit(CommitRefused((now - self._buffer_from) / SAMPLE_RATE))
            return
        speaking = self._ends_at is None and self.voice_activity is not None and self.voice_activity.speaking
        if self._segment is None:  # none held (voice activity heard no speech since the last)
            self._begin(max(self._buffer_from, self._base) if min_seconds else now)  # without min_seconds: no audio
        self._end_segment(by_commit=True)
        if speaking:
            self._begin(now, by_commit=True)

    def _begin(self, sample: int, by_commit: bool = False) -> None:
        self._segment = _Segment(self.utterances, self.language, self.context, sample, by_commit)
        self._given = sample
        self.utterances += 1

    def _give(self, until: int) -> None:
        """The utterance's audio up to sample `until`, handed to the transcribing task. One at its longest ends
        before more is given, the next taking the rest (where voice activity found an end, that one ends there)."""
        longest = round(self.max_utterance_seconds * SAMPLE_RATE)
        while until > self._given:
            segment = self._segment
            assert segment is not None
            if segment.given >= longest:
                self._close_segment(segment)
                self._begin(self._given)
                continue
            end = min(until, self._given + longest - segment.given)
            piece = self._audio[self._given - self._base : end - self._base]
            self._given, segment.given = end, segment.given + len(piece)
            self._queued += len(piece)
            self._segments.put_nowait((segment, piece))

    def _end_segment(self, by_commit: bool = False) -> None:
        """The utterance ends here (with what arrived of its end's padding): committed, its final to follow."""
        if self._segment is None:
            return
        now = self._base + len(self._audio)
        self._give(min(self._ends_at, now) if self._ends_at is not None else now)
        assert self._segment is not None
        self._close_segment(self._segment, by_commit)
        self._segment = self._ends_at = None

    def _close_segment(self, segment: _Segment, by_commit: bool = False) -> None:
        self._emit(Committed(segment.index, segment.given / SAMPLE_RATE, by_commit))
        self._segments.put_nowait((segment, None))
        self._buffer_from = self._given

    # -- transcribing: each utterance's passes in turn, then its final ------------------------------------------

    async def _transcribe(self) -> None:
        while (work := await self._segments.get()) is not None:
            segment, samples = work
            self._queued -= len(samples) if samples is not None else 0
            if segment.dropped:
                continue
            if self._current is not segment:
                self._start_utterance(segment)
            utterance = self._utterance
            assert utterance is not None
            if samples is not None:
                utterance.take(samples)
                while not segment.dropped and (step := utterance.next_pass()) is not None:
                    if await self._run(segment, step) and not segment.dropped:
                        self._emit_partial(segment, utterance)
                continue
            while not segment.dropped and (step := utterance.next_pass(final=True)) is not None:
                await self._run(segment, step)
            if not segment.dropped:  # no partial for the tail's pass
                text = utterance.text
                heard_until = self._heard_until(segment, utterance)
                language = utterance.heard_language
                start = segment.start / SAMPLE_RATE
                self._emit(
                    LiveTranscript(segment.index, text, language, True, text, heard_until, segment.failure, start)
                )
            self._current = self._utterance = self._passes = None

    def _start_utterance(self, segment: _Segment) -> None:
        assert self._transcriber is not None
        head = self._head
        if head is not None and not head.serves(self._transcriber, segment.context, segment.language):
            head = None
        self._passes = IncrementalPasses(self._transcriber, segment.context, segment.language, head)
        self._utterance = LiveUtterance(self._transcriber, self._passes, self.streaming)
        self._current = segment

    def _emit_partial(self, segment: _Segment, utterance: LiveUtterance) -> None:
        settled = visible_text(utterance.settled, segment.language is not None)
        heard_until = self._heard_until(segment, utterance)
        start = segment.start / SAMPLE_RATE
        self._emit(
            LiveTranscript(
                segment.index, utterance.text, utterance.heard_language, False, settled, heard_until, start=start
            )
        )

    @staticmethod
    def _heard_until(segment: _Segment, utterance: LiveUtterance) -> float:
        return (segment.start + len(utterance.heard)) / SAMPLE_RATE

    async def _run(self, segment: _Segment, step: Pass) -> bool:
        """Whether the pass ran (a failed one is an error event; the utterance goes on as before it)."""
        utterance = self._utterance
        assert utterance is not None and self._passes is not None

        def prompt(model: Transcriber):  # on the engine thread, while the transcribing task awaits the pass
            if self._passes is None or model is not self._passes.transcriber:  # reloaded: the stored part rebuilt
                self._transcriber = model
                self._passes = utterance.passes = IncrementalPasses(model, segment.context, segment.language)
            return self._passes.prepare(step.heard, step.prefix)

        job = TranscriptionJob(
            step.heard, segment.language, max_new_tokens=step.budget, interactive=True, prompt=prompt, draft=step.draft
        )
        try:
            tokens = [token.token async for token in self.engine.submit(job)]
        except TTSError as error:
            log.warning("a live pass failed: %s", error)
            segment.failure = error
            self._emit(PassFailed(segment.index, error))
            return False
        segment.failure = None
        utterance.passed(step, tokens)
        self._head = self._passes.head if self._passes is not None else self._head
        return True

    def _emit(self, event: LiveEvent) -> None:
        self.events.put_nowait(event)
