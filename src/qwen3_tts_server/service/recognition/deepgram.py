"""Deepgram's listening protocol (`/v1/listen`), as LiveKit's and Pipecat's Deepgram plugins speak it: raw audio as
binary frames, `Results` with interim and final transcripts, `SpeechStarted`, `UtteranceEnd`, `Finalize`,
`CloseStream`, then `Metadata`; and the prerecorded response of `POST /v1/listen`. One live session a socket
(`live.py`), its utterances Deepgram's finals.

What the plugins need of it, read from their code (livekit-plugins-deepgram 1.8.9 `stt.py`, pipecat-ai 1.14.0
`services/deepgram/stt.py` through deepgram-sdk 7.17.0's `listen.v1` types): the query (`model`, `language`,
`encoding=linear16`, `sample_rate`, `channels`, `interim_results`, `endpointing`, `vad_events`, `utterance_end_ms`,
`keyterm`, ...), the key as `Authorization: Token <key>`; LiveKit sends `endpointing=25` and `vad_events=true`,
ends a turn with `Finalize`, its stream with `CloseStream`, and only ends once the server closes the socket; it
drops a `Results` missing a key. Pipecat sends neither `endpointing` nor `vad_events` (Deepgram's endpointing is on
by default), sends `Finalize` when its own voice activity hears the user stop and takes the final marked
`from_finalize` as the turn's end; deepgram-sdk's types want `channel_index`, `start`, `duration`, a `confidence`
on every alternative and word, and `metadata.model_info` and `model_uuid`.

How Deepgram's settings are honoured: `endpointing` (milliseconds of silence that end speech, Deepgram's default on)
is our voice activity's silence, no shorter than MIN_SILENCE_MS (shorter pauses fall inside words for Silero
VAD); `false` turns it off, and then only `Finalize` and the socket's end make finals. A final is `speech_final` where
the silence ended it, `from_finalize` where `Finalize` did. `utterance_end_ms`: an `UtteranceEnd` follows each final
the silence ended (with its words). `keyterm` and `keywords` are the transcriber's context (the model's prompt: names
and terms it should spell so). `language` forces the language (`multi` or none: identified, and each alternative says
which in `languages`). Word times are shared by the words' lengths over the utterance's audio; `confidence` is 1.0
(the passes compute none). The transcript is always punctuated, as the model writes it (`punctuate`, `smart_format`,
`numerals`, `filler_words`, `diarize`, ... change nothing and are ignored; `multichannel=true` is refused)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ...audio.voice_activity import VoiceActivitySettings
from ...errors import InvalidInputError, TTSError, error_body, shown
from ...model.asr.aligner import TimedWord
from ...model.asr.languages import resolve_language
from ...model.asr.word_split import is_kept
from ...protocols import Message, WireProtocol, json_message
from ..deepgram import error_message, model_uuid, request_id
from .live import Committed, LiveEvent, LiveTranscript, SpeechBoundary
from .live_protocol import (
    LiveProtocol,
    RawAudio,
    SendMessage,
    end_of_speech,
    key_terms,
    provider_session,
    query_integer,
)
from .realtime import language_codes
from .subtitles import estimated_words, word_spans
from .transcription import RecognitionService, Transcript

DEFAULT_MODEL = "nova-3"  # Deepgram's default, the name given back where the query names none
ENCODINGS = {"linear16": "pcm_s16le", "mulaw": "pcm_mulaw", "alaw": "pcm_alaw"}  # raw audio taken
DEFAULT_ENDPOINTING_MS = 10  # Deepgram's
CHANNEL = [0, 1]  # Deepgram's `channel` of a mono stream: its index, and the count
KEY_TERMS = ("keyterm", "keywords")  # `keywords` as `word:boost`
TRUE = ("true", "1")
FALSE = ("false", "0")

DEEPGRAM_LISTEN_SOCKET = WireProtocol(
    "Deepgram's live transcription WebSocket",
    "WS /v1/listen",
    "Deepgram's live speech-to-text socket, as LiveKit's and Pipecat's Deepgram plugins speak it (their base URL set "
    "to this server): the query's `model` (one of our transcribers, or any Deepgram name: the first hosted), "
    "`language` (`multi` or none: identified), `encoding` `linear16`, `mulaw` or `alaw`, `sample_rate`, `channels` "
    "(mixed to one), `interim_results`, `endpointing` (silence in ms, at least 300; `false`: off), `vad_events`, "
    "`utterance_end_ms`, `keyterm`/`keywords` (the transcriber's context); the key as `Authorization: Token <key>`. "
    "A bad query value is an `Error` message, then a close with 1008.",
    (
        Message("(binary frame)", "client", "raw audio in the query's encoding", "audio for the transcript"),
        Message("Finalize", "client", "", "the utterance under way ends now: its final, `from_finalize`, at once"),
        Message("CloseStream", "client", "", "the audio held is transcribed, its finals and `Metadata` sent, then "
                "the socket closes"),
        Message("KeepAlive", "client", "", "keeps an idle socket open"),
        Message("Results", "server", "`channel.alternatives[0]` (`transcript`, `confidence`, `words`), `is_final`, "
                "`speech_final`, `from_finalize`, `start`, `duration`, `channel_index`, `metadata`",
                "an interim transcript of the utterance so far (replacing the last), or its final"),
        Message("SpeechStarted", "server", "`channel`, `timestamp`", "speech began (with `vad_events=true`)"),
        Message("UtteranceEnd", "server", "`channel`, `last_word_end`",
                "after a final the silence ended (with `utterance_end_ms`)"),
        Message("Metadata", "server", "`request_id`, `duration`, `channels`, `model_info`, ...",
                "last, before the socket closes"),
        Message("Error", "server", "`err_code`, `err_msg`, `description`",
                "a message refused, or a final missing the audio of a failed pass; the socket goes on"),
    ),
)  # fmt: skip


@dataclass(frozen=True)
class ListenOptions:
    """A Deepgram listening query as our settings."""

    model: str  # as named (Deepgram's default where none is)
    language: str | None  # the official name forced; None: identified
    encoding: str  # a key of ENCODINGS
    sample_rate: int
    channels: int
    interim_results: bool
    endpointing_ms: int | None  # None: off
    vad_events: bool
    utterance_end_ms: int | None
    context: str  # the key terms, for the transcriber's prompt

    def voice_activity(self) -> VoiceActivitySettings | None:
        if self.endpointing_ms is None:
            return None
        return end_of_speech(self.endpointing_ms)


def _flag(query: dict[str, str], name: str, default: bool) -> bool:
    value = query.get(name)
    if value is None:
        return default
    if value.lower() not in TRUE + FALSE:
        raise InvalidInputError(f"{name} is true or false, not {shown(value)}", param=name)
    return value.lower() in TRUE


def listen_options(items: Sequence[tuple[str, str]], live: bool = True) -> ListenOptions:
    """The query (each name and value, in order: `keyterm` may repeat) checked, as our settings. Over HTTP the audio
    is a file of any format, and `encoding` need not be given."""
    query = dict(items)
    language = query.get("language")
    encoding = query.get("encoding", "linear16" if live else "").lower()
    if live and encoding not in ENCODINGS:
        raise InvalidInputError(
            f"encoding {shown(encoding)} is not served: raw audio, one of {', '.join(ENCODINGS)}", param="encoding"
        )
    if _flag(query, "multichannel", False):
        raise InvalidInputError("multichannel is not served: the channels are mixed to one", param="multichannel")
    endpointing = query.get("endpointing", str(DEFAULT_ENDPOINTING_MS))
    off = endpointing.lower() in FALSE
    return ListenOptions(
        model=query.get("model") or DEFAULT_MODEL,
        language=None if language in (None, "multi") else resolve_language(language),
        encoding=encoding,
        sample_rate=query_integer(query, "sample_rate", 8000, 48000)
        or (8000 if encoding in ("mulaw", "alaw") else 16000),
        channels=query_integer(query, "channels", 1, 8) or 1,
        interim_results=_flag(query, "interim_results", False),
        endpointing_ms=None if off else query_integer({"endpointing": endpointing}, "endpointing", 0, 60000),
        vad_events=_flag(query, "vad_events", False),
        utterance_end_ms=query_integer(query, "utterance_end_ms", 0, 60000),
        context=key_terms(items, KEY_TERMS),
    )


def model_info(model: str) -> dict[str, str]:
    return {"name": model, "version": "qwen3-asr", "arch": "qwen3-asr"}


def metadata(model: str, request: str, seconds: float, channels: int, sha256: str = "") -> dict[str, Any]:
    """Deepgram's description of a transcription: a prerecorded response's `metadata`, a socket's last message."""
    uuid = model_uuid(model)
    return {
        "transaction_key": "deprecated",
        "request_id": request,
        "sha256": sha256,
        "created": datetime.now(UTC).isoformat(),
        "duration": round(seconds, 3),
        "channels": channels,
        "models": [uuid],
        "model_info": {uuid: model_info(model)},
    }


def words(text: str, timed: Sequence[TimedWord]) -> list[dict[str, Any]]:
    """Deepgram's words: each timed word as the transcript writes it (`punctuated_word`) and bare, in lower case."""
    spans = word_spans(text, [word.text for word in timed])
    written = [text[start:end] for start, end in spans] if spans is not None else [word.text for word in timed]
    return [
        {
            "word": "".join(filter(is_kept, shown_as)).lower() or shown_as,
            "start": word.start,
            "end": word.end,
            "confidence": 1.0,
            "punctuated_word": shown_as,
        }
        for word, shown_as in zip(timed, written, strict=True)
    ]


def alternative(text: str, timed: Sequence[TimedWord], languages: list[str] | None) -> dict[str, Any]:
    found = {"transcript": text, "confidence": 1.0, "words": words(text, timed)}
    return found | ({"languages": languages} if languages is not None else {})


def prerecorded_response(
    options: ListenOptions, transcript: Transcript, timed: Sequence[TimedWord], audio: bytes
) -> dict[str, Any]:
    """`POST /v1/listen`'s answer: one channel, one alternative."""
    codes = language_codes(transcript.language)
    channel: dict[str, Any] = {"alternatives": [alternative(transcript.text, timed, None)]}
    if options.language is None and codes:
        channel["detected_language"] = codes[0]
        channel["language_confidence"] = 1.0
    described = metadata(options.model, request_id(), transcript.seconds, 1, hashlib.sha256(audio).hexdigest())
    return {"metadata": described, "results": {"channels": [channel]}}


class DeepgramListener(LiveProtocol):
    """One socket's live session: `start`, then `audio` and `control` for each client message, `finish` at
    `CloseStream`, `cancel` when the client is gone."""

    def __init__(self, service: RecognitionService, options: ListenOptions, send: SendMessage, max_pending: float):
        live = provider_session(
            service, options.sample_rate, options.language, options.context, options.voice_activity(), max_pending
        )
        super().__init__(live, RawAudio(ENCODINGS[options.encoding], options.channels), send)
        self.options = options
        self.request_id = request_id()
        self._metadata = {
            "request_id": self.request_id,
            "model_info": model_info(options.model),
            "model_uuid": model_uuid(options.model),
        }
        self._ended: dict[int, bool] = {}  # utterance -> ended by the client's Finalize

    def control(self, text: str) -> bool:
        """A client's text message taken; False at `CloseStream`."""
        match json_message(text).get("type"):
            case "Finalize":
                self.live.commit()
            case "CloseStream":
                return False
            case "KeepAlive":
                pass
            case other:
                raise InvalidInputError(
                    f"unknown message type {shown(other)}: Finalize, CloseStream or KeepAlive", param="type"
                )
        return True

    async def finish(self) -> None:
        """`CloseStream`: what is held transcribed and sent, then the closing `Metadata`."""
        await super().finish()
        described = metadata(self.options.model, self.request_id, self.seconds, self.options.channels)
        await self.send({"type": "Metadata"} | described)

    async def forward(self, event: LiveEvent) -> None:
        if isinstance(event, SpeechBoundary):
            if event.kind == "started" and self.options.vad_events:
                await self.send({"type": "SpeechStarted", "channel": CHANNEL, "timestamp": round(event.seconds, 3)})
        elif isinstance(event, Committed):
            self._ended[event.utterance] = event.by_commit
        elif isinstance(event, TTSError):  # the session failed: it ends
            await self.send(error_message(error_body(event)))
        elif isinstance(event, LiveTranscript) and (event.final or self.options.interim_results):
            await self._results(event)

    async def _results(self, event: LiveTranscript) -> None:
        from_finalize = event.final and self._ended.pop(event.utterance, False)
        speech_final = event.final and not from_finalize and self.options.endpointing_ms is not None
        timed = estimated_words(event.text, event.start, event.heard_until)
        languages = language_codes(event.language) if self.options.language is None else None
        await self.send(
            {
                "type": "Results",
                "channel_index": CHANNEL,
                "duration": round(event.heard_until - event.start, 3),
                "start": round(event.start, 3),
                "is_final": event.final,
                "speech_final": speech_final,
                "from_finalize": from_finalize,
                "channel": {"alternatives": [alternative(event.text, timed, languages)]},
                "metadata": self._metadata,
            }
        )
        if event.final and event.failure is not None:
            await self.send(error_message(error_body(event.failure)))
        if speech_final and self.options.utterance_end_ms is not None and timed:
            await self.send({"type": "UtteranceEnd", "channel": CHANNEL, "last_word_end": timed[-1].end})
