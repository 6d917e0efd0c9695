"""Deepgram's speech protocol (`/v1/speak`), as LiveKit's and Pipecat's Deepgram plugins speak it: text in `Speak`
messages, a `Flush` that has the text so far spoken and answered with `Flushed` after its audio, `Clear` for
barge-in, `Close`; audio as bare binary frames. One `RealtimeSession` a socket; each flush is one of its utterances,
so audio and `Flushed` keep the order of the flushes.

What the plugins need of it, read from their code (livekit-plugins-deepgram 1.8.9 `tts.py`, pipecat-ai 1.14.0
`services/deepgram/tts.py`): the voice in the `model` query (Deepgram's model names are its voices: `aura-2-thalia-en`),
`encoding` and `sample_rate` in the query, the key as `Authorization: Token <key>`; LiveKit sends a segment a word a
`Speak` (each with its space) then `Flush`, and ends the segment on `Flushed`; it reuses a socket for later segments
and, closing its pool, sends `Flush` and `Close` and reads one more message. Pipecat sends each sentence as a `Speak`,
`Flush` at the end of the reply, `Clear` on an interruption, and plays the binary frames as they come."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ...errors import InvalidInputError, TTSError, shown
from ...protocols import Message, WireProtocol, json_message
from ...text.language import LANGUAGE_NAMES
from ..deepgram import error_message, model_uuid, request_id
from .realtime import RealtimeSession, RequestParser
from .synthesis import SpeechService

DEFAULT_MODEL = "aura-2-thalia-en"  # Deepgram's own default voice
DEEPGRAM_MODEL_PREFIX = "aura"  # a Deepgram voice name: spoken by the default voice, in the language it names
RAW_ENCODINGS = {"linear16": "pcm", "mulaw": "mulaw", "alaw": "alaw"}  # the socket's, and the HTTP route's bare ones
ENCODED = {"mp3": "mp3", "opus": "opus", "flac": "flac", "aac": "aac"}  # the HTTP route's, each in its own container
DEFAULT_RATES = {"linear16": 24000, "mulaw": 8000, "alaw": 8000}
SPEED_RANGE = (0.7, 1.5)  # Deepgram's bounds

DEEPGRAM_SPEAK_SOCKET = WireProtocol(
    "Deepgram's streaming speech WebSocket",
    "WS /v1/speak",
    "Deepgram's text-to-speech socket, as LiveKit's and Pipecat's Deepgram plugins speak it (their base URL set to "
    "this server): the voice in the `model` query (one of ours, or a Deepgram name such as `aura-2-thalia-en`, which "
    "the default voice speaks in the language its last part names), `encoding` `linear16`, `mulaw` or `alaw`, "
    "`sample_rate`, `speed` (0.7 to 1.5); the key as `Authorization: Token <key>`. A bad query value is an `Error` "
    "message, then a close with 1008.",
    (
        Message("Speak", "client", "`text`", "text to speak, held until a `Flush` (or a clause's end: speech starts "
                "at the first finished clause)"),
        Message("Flush", "client", "", "the text so far is spoken; `Flushed` follows its audio"),
        Message("Clear", "client", "", "barge-in: the audio not yet sent and the text held are dropped; `Cleared`"),
        Message("Close", "client", "", "the text held is spoken and answered with `Flushed`, then the socket closes"),
        Message("KeepAlive", "client", "", "nothing (taken, as Deepgram's listening socket takes it)"),
        Message("Metadata", "server", "`request_id`, `model_name`, `model_version`, `model_uuid`",
                "first, once the socket is open"),
        Message("audio", "server", "binary frames", "the audio of the flushed text, in the asked encoding"),
        Message("Flushed", "server", "`sequence_id` (0 for the first flush)", "a flush's audio is all sent"),
        Message("Cleared", "server", "`sequence_id`", "a `Clear` took effect"),
        Message("Error", "server", "`err_code`, `err_msg`, `description`",
                "a message refused (a text too long, an unknown type, ...); the socket goes on"),
    ),
)  # fmt: skip


@dataclass(frozen=True)
class SpeakOptions:
    """The query of a Deepgram speech request as our request's fields."""

    model: str
    fields: dict[str, Any]


def speak_options(
    model: str | None,
    encoding: str | None,
    sample_rate: int | None,
    speed: float | None,
    container: str | None = "none",
    http: bool = False,
) -> SpeakOptions:
    """Deepgram's query values as our speech request's fields. The socket takes bare samples only; the HTTP route
    also the encoded formats (Deepgram's `container` left to each: wav for `linear16` when not given)."""
    model = model or DEFAULT_MODEL
    encoding = (encoding or "linear16").lower()
    fields: dict[str, Any] = voice_of(model)
    if encoding in RAW_ENCODINGS:
        fields["sample_rate"] = sample_rate or DEFAULT_RATES[encoding]
        fields["response_format"] = RAW_ENCODINGS[encoding]
        if http and (container or "wav") == "wav":
            if encoding != "linear16":
                raise InvalidInputError(f"{encoding} is served bare: ask for container=none", param="container")
            fields["response_format"] = "wav"
        elif container not in (None, "none", "wav"):
            raise InvalidInputError(f"container {shown(container)} is not served for {encoding}", param="container")
    elif http and encoding in ENCODED:
        fields["response_format"] = ENCODED[encoding]
        if sample_rate is not None:
            fields["sample_rate"] = sample_rate
    else:
        served = ", ".join([*RAW_ENCODINGS, *ENCODED] if http else RAW_ENCODINGS)
        raise InvalidInputError(f"encoding {shown(encoding)} is not served: one of {served}", param="encoding")
    if speed is not None:
        if not SPEED_RANGE[0] <= speed <= SPEED_RANGE[1]:
            raise InvalidInputError(f"speed is from {SPEED_RANGE[0]} to {SPEED_RANGE[1]}, not {speed}", param="speed")
        fields["speed"] = speed
    return SpeakOptions(model, fields)


def voice_of(model: str) -> dict[str, Any]:
    """The voice (and language) a Deepgram `model` names: one of ours by its name, or a Deepgram voice name
    (`aura-2-thalia-en`), which the server's default voice (DEFAULT_VOICE: no voice named) speaks in the language
    of its last part."""
    if not model.lower().startswith(DEEPGRAM_MODEL_PREFIX):
        return {"voice": model}
    code = model.rsplit("-", 1)[-1].lower()
    return {"voice": None} | ({"language": LANGUAGE_NAMES[code]} if code in LANGUAGE_NAMES else {})


def metadata(model: str) -> dict[str, Any]:
    """The first message of a socket, as Deepgram sends it."""
    return {
        "type": "Metadata",
        "request_id": request_id(),
        "model_name": model,
        "model_version": "qwen3-tts",
        "model_uuid": model_uuid(model),
    }


SendEvent = Callable[[dict[str, Any]], Awaitable[None]]
SendAudio = Callable[[bytes], Awaitable[None]]


class DeepgramChannel:
    """The session's audio and events as Deepgram's messages: an utterance's `done` is a flush's `Flushed`, a
    cancel's `cancelled` is `Cleared`, an error `Error`; the session's other events say nothing on this socket."""

    def __init__(self, send_event: SendEvent, send_audio: SendAudio):
        self._send_event, self.send_audio = send_event, send_audio
        self.flushed = 0
        self.cleared = 0

    async def send_event(self, payload: dict) -> None:
        match payload.get("type"):
            case "done":
                await self._send_event({"type": "Flushed", "sequence_id": self.flushed})
                self.flushed += 1
            case "cancelled":
                await self._send_event({"type": "Cleared", "sequence_id": self.cleared})
                self.cleared += 1
            case "error":
                await self._send_event(error_message(payload["error"]))


class DeepgramSocket:
    """One socket's session: `handle` takes each client message, False once the client asks to close."""

    def __init__(
        self, speech: SpeechService, channel: DeepgramChannel, parse: RequestParser, config: dict, max_pending_text: int
    ):
        self.session = RealtimeSession(speech, channel, parse, max_pending_text)
        self.config = config

    async def __aenter__(self) -> DeepgramSocket:
        await self.session.__aenter__()
        await self.session.update(self.config)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.session.__aexit__(*exc)

    async def handle(self, text: str | None) -> bool:
        """One client message (its text; None for a binary one); a refused one is answered with `Error`."""
        try:
            message = json_message(text)
            match message.get("type"):
                case "Speak":
                    text = message.get("text")
                    if not isinstance(text, str):
                        raise InvalidInputError("`text` must be a string", param="text")
                    if text:
                        await self.session.append(text)
                case "Flush":
                    await self.session.commit(allow_empty=True)
                case "Clear":
                    await self.session.cancel()
                case "Close":
                    await self.session.commit(allow_empty=True)
                    await self.session.drained()
                    return False
                case "KeepAlive":  # what Deepgram's listening socket takes; harmless here
                    pass
                case other:
                    raise InvalidInputError(
                        f"unknown message type {shown(other)}: Speak, Flush, Clear or Close", param="type"
                    )
        except TTSError as exc:
            await self.session.report(exc)
        return True
