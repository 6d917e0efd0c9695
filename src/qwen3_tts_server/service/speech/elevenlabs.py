"""ElevenLabs' streaming speech WebSocket (`multi-stream-input`), as LiveKit's and Pipecat's ElevenLabs plugins speak
it: several contexts on one socket, each a `RealtimeSession` of its own whose events and audio become ElevenLabs'
messages (`ContextChannel`).

What the two plugins need of it, read from their code: audio as `{"audio", "contextId"}` messages; each segment's
character times (`alignment` and `normalizedAlignment`, both in the client's text: LiveKit reads the normalised one
and shows its characters as the transcript) in a message of their own once the aligner has timed them, with the
spaces between words and one after the segment (Pipecat ends a word at a space); then `{"isFinal": true}` alone.
LiveKit asks for `sync_alignment=true` and reads the times as counted from the context's first audio; Pipecat does
not, and adds each message's span to a clock of its own, so its times restart at 0 in each message. MP3 is one
stream of bare frames per context (LiveKit decodes a context's audio as one stream: a header in the middle stops
it)."""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...audio.encoding import AudioFormat, StreamEncoder
from ...errors import InvalidInputError, TTSError, error_body, shown
from ...model.asr.aligner import TimedWord
from ...protocols import Message, WireProtocol, json_message
from .contexts import ContextSocket, Send, joined
from .realtime import RealtimeSession, RequestParser
from .synthesis import SpeechService
from .word_times import character_times

log = logging.getLogger(__name__)
DEFAULT_CONTEXT = "default"  # a message that names no context speaks in this one
PCM_RATES = (8000, 16000, 22050, 24000, 32000, 44100, 48000)
BARE_MP3 = AudioFormat("mp3", None, "libmp3lame", "audio/mpeg")  # frames only: no ID3 tag, no Xing frame
MAX_CONTEXTS = 5  # open at once on one socket (ElevenLabs' limit); a context holds its place until its `isFinal`
MAX_INACTIVITY_TIMEOUT = 180.0  # seconds: ElevenLabs' own maximum

ELEVENLABS_SOCKET = WireProtocol(
    "ElevenLabs' streaming speech WebSocket",
    "WS /v1/text-to-speech/{voice_id}/multi-stream-input",
    "ElevenLabs' multi-context protocol, as LiveKit's and Pipecat's ElevenLabs plugins speak it (their `base_url` set "
    "to this server): the voice is one of ours, `model_id` any (ElevenLabs' ids are taken), `output_format` "
    "`pcm_<rate>`, `mp3_<rate>_<kbps>`, `ulaw_8000` or `alaw_8000`, the key in `xi-api-key`. With a ForcedAligner "
    "hosted, every segment's characters come timed; `sync_alignment=true` counts the times from the context's first "
    "audio, otherwise each alignment message counts from its own start. A socket silent for `inactivity_timeout` "
    f"seconds (20 unless given; above 0, at most {MAX_INACTIVITY_TIMEOUT:g}) with no context open is closed. At most "
    f"{MAX_CONTEXTS} contexts are open at once, each until its `isFinal`. A bad voice, format or query value is an "
    "error, then a close with 1008.",
    (
        Message("text", "client", "`text`, `context_id`, optional `flush`, `voice_settings` (its `speed` is used)",
                "text of the context (opening it on its first message); whitespace alone speaks nothing; with "
                "`flush` the text so far is spoken without waiting for its sentence to end; a text longer than a "
                "context may have waiting to be spoken (MAX_PENDING_TEXT) is refused as too long"),
        Message("flush", "client", "`context_id`, `flush: true`", "the context's text so far is spoken"),
        Message("close_context", "client", "`context_id`, `close_context: true`",
                "the context's text is all there: its last audio follows, then `isFinal`"),
        Message("close_socket", "client", "`close_socket: true`", "the server closes the socket"),
        Message("audio", "server", "`audio` (base64), `contextId`, `alignment` and `normalizedAlignment` null",
                "a piece of the context's audio"),
        Message("alignment", "server", "`audio` null, `contextId`, `alignment` and `normalizedAlignment` (`chars`, "
                "`charStartTimesMs`, `charDurationsMs`)", "a segment's characters timed, after its audio"),
        Message("isFinal", "server", "`isFinal: true`, `contextId`", "the context is spoken whole"),
        Message("error", "server", "`error`, `message`, `code`, `contextId` (if a context's)",
                f"a message refused (a text too long, a context past the {MAX_CONTEXTS} open, ...); the socket and "
                "its contexts go on"),
    ),
)  # fmt: skip


@dataclass(frozen=True)
class OutputFormat:
    """An ElevenLabs `output_format` as our request fields."""

    response_format: str  # pcm, mulaw or alaw: what the session makes
    sample_rate: int
    mp3: bool = False  # the pcm transcoded to bare MP3 frames


def output_format(name: str) -> OutputFormat:
    kind, _, rest = name.partition("_")
    rate = rest.split("_")[0]
    if kind in ("pcm", "mp3") and rate.isdigit() and int(rate) in PCM_RATES:
        return OutputFormat("pcm", int(rate), mp3=kind == "mp3")
    if name in ("ulaw_8000", "alaw_8000"):
        return OutputFormat("mulaw" if kind == "ulaw" else "alaw", 8000)
    raise InvalidInputError(
        f"output_format {shown(name)} is not served: pcm_<rate> or mp3_<rate>_<kbps> (rates "
        f"{', '.join(map(str, PCM_RATES))}), ulaw_8000 or alaw_8000",
        param="output_format",
    )


class ContextChannel:
    """One context's view of the socket: the session's audio and events as ElevenLabs' messages."""

    def __init__(self, context: str, send: Send, fmt: OutputFormat, sync_alignment: bool, on_final: Callable[[], None]):
        self.context = context
        self.send = send
        self.sync_alignment = sync_alignment
        self.on_final = on_final
        self.mp3 = StreamEncoder(BARE_MP3, fmt.sample_rate, fmt.sample_rate) if fmt.mp3 else None

    async def send_audio(self, data: bytes) -> None:
        if self.mp3 is not None:
            data = self.mp3.write(np.frombuffer(data, dtype="<i2").astype(np.float32) / 32767.0)
        if data:
            await self._audio(data)

    async def send_event(self, payload: dict) -> None:
        match payload.get("type"):
            case "segment.words":
                await self._alignment(payload)
            case "done":
                if self.mp3 is not None and (tail := self.mp3.close()):
                    await self._audio(tail)
                await self.send({"isFinal": True, "contextId": self.context})
                self.on_final()
            case "error":
                await self.send(error_message(payload["error"], self.context))

    async def _audio(self, data: bytes) -> None:
        audio = base64.b64encode(data).decode()
        await self.send({"audio": audio, "alignment": None, "normalizedAlignment": None, "contextId": self.context})

    async def _alignment(self, payload: dict) -> None:
        """A segment's characters timed; a segment whose words could not be timed keeps the clock with one space
        that lasts its whole audio."""
        start, end = payload["start"], payload["end"]
        text = payload["text"] if payload["text"][-1:].isspace() else payload["text"] + " "
        if "error" in payload:
            log.warning("context %s: a segment's words were not timed: %s", self.context, payload["error"]["message"])
            text, words = " ", []
        else:
            words = [(word["word"], word["start"], word["end"]) for word in payload["words"]]
        origin = 0.0 if self.sync_alignment else start
        times = character_times(
            text, [TimedWord(w, s - origin, e - origin) for w, s, e in words], start - origin, end - origin
        )
        alignment = {"chars": times.chars, "charStartTimesMs": times.starts_ms, "charDurationsMs": times.durations_ms}
        await self.send(
            {"audio": None, "alignment": alignment, "normalizedAlignment": alignment, "contextId": self.context}
        )


def error_message(error: dict, context: str | None) -> dict:
    """ElevenLabs' error message: its text in `error` and `message`, our code beside it."""
    message = {"error": error["message"], "message": error["message"], "code": error.get("code")}
    return message | ({"contextId": context} if context is not None else {})


class ElevenLabsSocket(ContextSocket):
    """One connection's contexts. `config` is the connection's request fields (voice, model, format, rate,
    normalisation, timestamps), checked before the first message."""

    def __init__(
        self,
        speech: SpeechService,
        send: Send,
        parse: RequestParser,
        config: dict[str, Any],
        fmt: OutputFormat,
        sync_alignment: bool,
        max_pending_text: int,
    ):
        super().__init__(send)
        self.speech, self.parse, self.config, self.fmt = speech, parse, config, fmt
        self.sync_alignment = sync_alignment
        self.max_pending_text = max_pending_text

    async def handle(self, text: str | None) -> bool:
        """One client message; False once the client asks to close the socket. A bad message is answered with an
        error message; the socket goes on."""
        context = None
        try:
            message = json_message(text)
            if message.get("close_socket") is True:
                return False
            context = str(message.get("context_id") or DEFAULT_CONTEXT)
            if message.get("close_context") is True:
                await self._close_context(context)
                return True
            words, flush = message.get("text"), message.get("flush") is True
            if words is not None and not isinstance(words, str):
                raise InvalidInputError("`text` must be a string", param="text")
            if words is not None and len(words) > self.max_pending_text:  # never taken, however long one waits
                raise InvalidInputError(
                    f"text is too long: {len(words)} characters, at most {self.max_pending_text}", param="text"
                )
            if words is None and not flush:
                raise InvalidInputError("a message carries `text`, `flush`, `close_context` or `close_socket`")
            speaks = bool(words and words.strip())
            if words == "" and not flush or context not in self.contexts and flush and not speaks:
                return True  # a keep-alive, or a flush of a context already spoken whole
            if context not in self.contexts:
                await self._open(context, message)
            session = self.contexts[context]
            if speaks:
                await session.append(joined(session, words))
            if flush:
                await session.flush()
        except TTSError as exc:
            await self.send(error_message(error_body(exc), context))
        return True

    async def _open(self, context: str, message: dict) -> None:
        if len(self.contexts) >= MAX_CONTEXTS:
            raise InvalidInputError(
                f"at most {MAX_CONTEXTS} contexts are open at once on a socket: context {shown(context)} was not "
                "opened; close one first (`close_context`: its place frees at its `isFinal`)",
                param="context_id",
            )
        settings = message.get("voice_settings") or {}
        config = dict(self.config)
        if isinstance(settings, dict) and settings.get("speed") is not None:
            config["speed"] = settings["speed"]
        channel = ContextChannel(context, self.send, self.fmt, self.sync_alignment, lambda: self._leave(context))
        session = RealtimeSession(self.speech, channel, self.parse, self.max_pending_text, words_before_done=True)
        await self._enter(context, session, config)

    async def _close_context(self, context: str) -> None:
        session = self.contexts.get(context)
        try:
            if session is None:
                raise InvalidInputError("nothing to commit")
            await session.commit()  # its `done` becomes `isFinal`
        except InvalidInputError:  # nothing said in it: nothing to wait for
            self._leave(context)
            await self.send({"isFinal": True, "contextId": context})
