"""Cartesia's two listening sockets, as LiveKit's and Pipecat's Cartesia plugins speak them, over one live session a
socket (`live.py`, with voice activity on: Silero VAD ends each utterance where its speech stops).

- `WS /stt/websocket` (Cartesia's `ink-whisper`): raw audio as binary frames; the text message `finalize` ends the
  utterance under way (its final, then `flush_done`), `done` or `close` ends the stream (every final, then `done`,
  then the socket closes). The server sends `transcript` messages whose `text` is the utterance's so far (Cartesia's
  "delta since the last final"), `is_final` on its final, `duration` the audio it covers since the last transcript
  message (LiveKit adds them up into times), `words` with `start` and `end`, and `language`.
- `WS /stt/turns/websocket` (Cartesia's `ink-2`, with turn detection): `connected` first, then for each utterance
  `turn.start`, `turn.update` with the turn's transcript so far, and `turn.end` with its final; the text message
  `{"type": "close"}` ends the stream as above. `turn.eager_end` and `turn.resume` are never sent (no turn
  prediction ahead of the silence); the `turn_*` thresholds are taken and change nothing.

What the plugins need, read from their code (livekit-plugins-cartesia 1.8.9 `stt.py` and `_recognize_streams/`:
`ink-2`, its default for English, opens the turns socket and ignores `flush`, `ink-whisper` the other and sends
`finalize` at a flush and `close` at the end; pipecat-ai 1.14.0 `services/cartesia/stt.py`: the other socket,
`finalize` when its voice activity hears the user stop, `done` at the end, and only `transcript` and `error` read):
the query's `model`, `language` (ISO code), `encoding` (`pcm_s16le`; also `pcm_s32le`, `pcm_f32le`, `pcm_mulaw`,
`pcm_alaw`), `sample_rate`, `keyterm` (the transcriber's context); the key as `X-API-Key`. `max_silence_duration_secs`
is the voice activity's silence, no shorter than MIN_SILENCE_MS; `min_volume` changes nothing. Word times are shared
by the words' lengths over the utterance's audio."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...audio.voice_activity import VoiceActivitySettings
from ...errors import InvalidInputError, TTSError, shown
from ...model.asr.languages import resolve_language
from ...protocols import Message, WireProtocol, json_message
from ..deepgram import request_id
from .live import Committed, LiveEvent, LiveTranscript, SpeechBoundary
from .live_protocol import (
    RAW_WIDTHS,
    LiveProtocol,
    RawAudio,
    SendMessage,
    end_of_speech,
    key_terms,
    provider_session,
    query_integer,
)
from .realtime import language_codes
from .subtitles import estimated_words
from .transcription import RecognitionService

FINALIZE = "finalize"
ENDS = ("done", "close")  # the text messages that end the stream (`{"type": "close"}` on the turns socket)

CARTESIA_STT_SOCKET = WireProtocol(
    "Cartesia's live transcription WebSocket",
    "WS /stt/websocket",
    "Cartesia's speech-to-text socket (`ink-whisper`), as LiveKit's and Pipecat's Cartesia plugins speak it (their "
    "base URL set to this server): the query's `model` (one of our transcribers, or any Cartesia name: the first "
    "hosted), `language` (ISO code; none: identified), `encoding` (`pcm_s16le`, `pcm_s32le`, `pcm_f32le`, "
    "`pcm_mulaw`, `pcm_alaw`), `sample_rate`, `keyterm` (the transcriber's context), `max_silence_duration_secs`; "
    "the key as `X-API-Key`. Utterances end where speech stops (voice activity) or at `finalize`. A bad query value "
    "is an `error` message, then a close with 1008.",
    (
        Message("(binary frame)", "client", "raw audio in the query's encoding", "audio for the transcript"),
        Message("finalize", "client", "(plain text)", "the utterance under way ends now: its final, then "
                "`flush_done`"),
        Message("done", "client", "(plain text; or `close`)", "the audio held is transcribed and its finals sent, "
                "then `done`, then the socket closes"),
        Message("transcript", "server", "`text`, `is_final`, `duration`, `words` (`word`, `start`, `end`), "
                "`language`, `request_id`", "the utterance's transcript so far, or its final"),
        Message("flush_done", "server", "`request_id`", "a `finalize` took effect: its final was sent"),
        Message("done", "server", "`request_id`", "the stream ended; the socket closes"),
        Message("error", "server", "`message`, `code`, `status_code`, `error_code`, `title`",
                "a message refused, or a final missing the audio of a failed pass; the socket goes on"),
    ),
)  # fmt: skip

CARTESIA_TURNS_SOCKET = WireProtocol(
    "Cartesia's turn-taking transcription WebSocket",
    "WS /stt/turns/websocket",
    "Cartesia's speech-to-text socket with turn detection (`ink-2`, LiveKit's default for English): the query and "
    "key as for `/stt/websocket`; a turn is an utterance, begun and ended by voice activity.",
    (
        Message("(binary frame)", "client", "raw audio in the query's encoding", "audio for the transcript"),
        Message("close", "client", "", "the audio held is transcribed and its turns ended, then the socket closes"),
        Message("connected", "server", "`request_id`", "first, once the socket is open"),
        Message("turn.start", "server", "`request_id`", "speech began"),
        Message("turn.update", "server", "`transcript`, `request_id`", "the turn's transcript so far"),
        Message("turn.end", "server", "`transcript`, `request_id`", "the turn ended: its final transcript"),
        Message("error", "server", "`message`, `status_code`, `error_code`, `title`, `request_id`",
                "a message refused; the socket goes on"),
    ),
)  # fmt: skip


@dataclass(frozen=True)
class SttOptions:
    """A Cartesia listening query as our settings."""

    model: str | None
    language: str | None  # the official name forced; None: identified
    encoding: str  # a key of RAW_WIDTHS
    sample_rate: int
    silence_ms: int
    context: str  # the key terms, for the transcriber's prompt

    def voice_activity(self) -> VoiceActivitySettings:
        return end_of_speech(self.silence_ms)


def stt_options(items: Sequence[tuple[str, str]]) -> SttOptions:
    """The query (each name and value, in order: `keyterm` may repeat) checked, as our settings."""
    query = dict(items)
    encoding = query.get("encoding", "pcm_s16le")
    if encoding not in RAW_WIDTHS:
        raise InvalidInputError(
            f"encoding {shown(encoding)} is not served: one of {', '.join(RAW_WIDTHS)}", param="encoding"
        )
    silence = query.get("max_silence_duration_secs")
    try:
        silence_ms = (
            round(float(silence) * 1000) if silence is not None else VoiceActivitySettings().silence_duration_ms
        )
    except (ValueError, OverflowError):  # not a number, or nan or infinite
        silence_ms = -1
    if not 0 <= silence_ms <= 60000:
        raise InvalidInputError(
            f"max_silence_duration_secs is from 0 to 60, not {shown(silence)}", param="max_silence_duration_secs"
        )
    return SttOptions(
        model=query.get("model"),
        language=resolve_language(query.get("language")),
        encoding=encoding,
        sample_rate=query_integer(query, "sample_rate", 8000, 48000) or 16000,
        silence_ms=silence_ms,
        context=key_terms(items, ("keyterm",)),
    )


def error_message(error: TTSError, request: str | None = None) -> dict[str, Any]:
    """Cartesia's error message: both its sockets' fields (LiveKit reads `code` on one, `status_code` on the other)."""
    return {
        "type": "error",
        "error_code": error.code,
        "code": error.status,
        "status_code": error.status,
        "title": error.code.replace("_", " "),
        "message": str(error),
    } | ({"request_id": request} if request is not None else {})


class CartesiaListener(LiveProtocol):
    """One socket's live session, `turns` for the turn-taking socket: `start`, then `audio` and `control` for each
    client message, `finish` at the stream's end, `cancel` when the client is gone."""

    def __init__(
        self, service: RecognitionService, options: SttOptions, send: SendMessage, max_pending: float, turns: bool
    ):
        live = provider_session(
            service, options.sample_rate, options.language, options.context, options.voice_activity(), max_pending
        )
        super().__init__(live, RawAudio(options.encoding), send)
        self.options, self.turns = options, turns
        self.request_id = request_id()
        self._finalized: set[int] = set()  # utterances ended by `finalize`: `flush_done` follows their final
        self._turn: int | None = None  # the utterance whose turn is under way (`turn.start` sent, not `turn.end`)
        self._waiting: list[int] = []  # utterances whose speech began, their turn not yet started
        self._covered = 0.0  # seconds of audio the transcript messages sent so far cover

    async def start(self) -> None:
        """The live session started (`LiveProtocol.start`), and, on the turns socket, `connected` sent."""
        await super().start()
        if self.turns:
            await self.send({"type": "connected", "request_id": self.request_id})

    def control(self, text: str) -> bool:
        """A client's text message taken; False at the stream's end."""
        command = text.strip()
        if command.startswith("{"):  # the turns socket's JSON form
            command = _json_type(command)
        if command == FINALIZE and not self.turns:
            self.live.commit()
            return True
        if command in ENDS:
            return False
        served = "close" if self.turns else "finalize, done or close"
        raise InvalidInputError(f"unknown message {shown(command[:40])}: {served}", param="type")

    async def finish(self) -> None:
        await super().finish()
        if not self.turns:
            await self.send({"type": "done", "request_id": self.request_id})

    async def forward(self, event: LiveEvent) -> None:
        if isinstance(event, SpeechBoundary):
            if event.kind == "started" and self.turns:
                self._waiting.append(event.utterance)
                await self._next_turn()
        elif isinstance(event, Committed):
            if event.by_commit:
                self._finalized.add(event.utterance)
        elif isinstance(event, TTSError):  # the session failed: it ends
            await self.send(error_message(event, self.request_id))
        elif isinstance(event, LiveTranscript):
            await (self._turn_event(event) if self.turns else self._transcript(event))
            if event.final and event.failure is not None:
                await self.send(error_message(event.failure, self.request_id))

    async def _next_turn(self) -> None:
        """The next turn begins once the last has ended: speech heard again while the last turn's final is still
        being transcribed begins its turn after that final (clients take one turn at a time)."""
        if self._turn is None and self._waiting:
            self._turn = self._waiting.pop(0)
            await self.send({"type": "turn.start", "request_id": self.request_id})

    async def _turn_event(self, event: LiveTranscript) -> None:
        if self._turn is None and event.utterance not in self._waiting:  # one cut at MAX_SECONDS goes on: no speech
            self._waiting.insert(0, event.utterance)  # began it, yet it is a turn of its own
            await self._next_turn()
        if event.utterance != self._turn:
            return
        kind = "turn.end" if event.final else "turn.update"
        await self.send({"type": kind, "transcript": event.text, "request_id": self.request_id})
        if event.final:
            self._turn = None
            await self._next_turn()

    async def _transcript(self, event: LiveTranscript) -> None:
        if event.text:
            duration, self._covered = max(event.heard_until - self._covered, 0.0), event.heard_until
            timed = estimated_words(event.text, event.start, event.heard_until)
            codes = language_codes(event.language)
            message = {
                "type": "transcript",
                "request_id": self.request_id,
                "text": event.text,
                "is_final": event.final,
                "duration": round(duration, 3),
                "words": [{"word": word.text, "start": word.start, "end": word.end} for word in timed],
            }
            await self.send(message | ({"language": codes[0]} if codes else {}))
        if event.final and event.utterance in self._finalized:
            self._finalized.discard(event.utterance)
            await self.send({"type": "flush_done", "request_id": self.request_id})


def _json_type(text: str) -> str:
    """The `type` of a JSON message ("" for one that is not an object with a string `type`)."""
    kind = json_message(text).get("type")
    return kind if isinstance(kind, str) else ""
