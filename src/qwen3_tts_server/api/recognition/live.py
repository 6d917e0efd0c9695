"""WS /ws/transcribe: the earlier ASR server's live transcription protocol (docs/earlier_asr_server.md, section 2),
over a live session (service/recognition/live.py).

The client sends binary frames of 16-bit little-endian mono PCM at 16 kHz, or at `?sample_rate=` (8000 for
telephony), and JSON actions: `flush` (the utterance's final), `reset` (drop it), `config` (`language`,
`use_server_vad`). The server greets with `{"status": "connected", ...}`, sends partials `{text, is_partial: true,
is_final: false}` that replace the previous one, and finals `{text, is_partial: false, is_final: true}` on `flush`
(always exactly one, its text possibly empty) and, with server voice activity on, where speech stops.

What the earlier server got wrong is done right: no audio older than a window is dropped (an utterance is
transcribed whole, by the official streaming algorithm), voice activity works, ISO language codes are accepted, the
default language is identified rather than forced English, `use_server_vad: "false"` turns it off, and errors
are error messages (`{code, message, statusCode}`), never transcript text, and a bad message costs its error only,
never the session. A WebSocket that the client closes cannot carry the final: a client that wants it sends `flush`
first and waits for it. Once the client is gone, or has gone LIVE_IDLE_TIMEOUT seconds without use (`live_idle.py`:
no audio, no action taken, no transcript sent), the audio its session still holds is dropped and its slot given back
at once.

The greeting's `window_max_s` was the earlier server's window: partials covered only the last 6 s, older speech
dropped out. Here no audio of an utterance is dropped: the greeting gives the longest audio the model transcribes in
one piece (`MAX_SECONDS`, 1200 s, where uploads are cut), and an utterance that reaches it gets its final there, as at
a `flush`, the next one taking the audio that follows."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging

from fastapi import APIRouter, WebSocket
from pydantic import BaseModel, ConfigDict, StrictBool, StrictInt, StrictStr
from starlette.websockets import WebSocketDisconnect, WebSocketDisconnected

from ...audio.decoding import pcm_samples
from ...audio.voice_activity import VoiceActivitySettings
from ...config import Settings
from ...errors import IdleTimeoutError, TTSError, checked, shown
from ...model.asr.languages import resolve_language
from ...protocols import Message, WireProtocol
from ...service.recognition.live import LiveSession, LiveTranscript, PassFailed
from ...service.recognition.routing import route_recognizer
from ..dependencies import ServicesDep
from ..limits import refusal_close_code
from ..websockets import accepted, close_quietly
from .live_idle import IDLE_CLOSE_CODE, IdleClock

router = APIRouter()
log = logging.getLogger(__name__)
RATES = range(8000, 48001)  # sample rates taken, in Hz
TRUE_WORDS = ("true", "1", "yes", "on")


class ConfigAction(BaseModel):
    """A `config` action's fields (any others are ignored, as the earlier server ignored them)."""

    model_config = ConfigDict(extra="ignore")
    language: StrictStr | None = None
    use_server_vad: StrictBool | StrictInt | StrictStr | None = None  # read by `truthy`


def voice_activity(settings: Settings, on: bool) -> VoiceActivitySettings | None:
    if not on:
        return None
    return VoiceActivitySettings(settings.vad_threshold, settings.vad_prefix_padding_ms, settings.vad_silence_ms)


def truthy(value: object) -> bool:
    """`true`, `1`, `yes`, `on` (any case) or a JSON true: on. The earlier server took any non-empty string as on."""
    return value is True or (isinstance(value, str | int) and str(value).strip().lower() in TRUE_WORDS)


LIVE_TRANSCRIBE = WireProtocol(
    "The earlier ASR server's live transcription",
    "WS /ws/transcribe[?sample_rate=8000&language=en&use_server_vad=false]",
    "Binary frames of 16-bit little-endian mono PCM in (16 kHz, or `sample_rate`), JSON actions in, JSON frames out "
    "(no `type`: a frame is told apart by its keys).",
    (
        Message("(binary frame)", "client", "16-bit PCM", "audio for the utterance under way"),
        Message('{"action": "flush"}', "client", "", "ends the utterance: exactly one final follows"),
        Message('{"action": "reset"}', "client", "", "drops the utterance; answered `buffer_reset`"),
        Message('{"action": "config"}', "client", "`language`, `use_server_vad`",
                "from the next utterance on; answered `configured`"),
        Message('{"status": "connected"}', "server", "`sample_rate`, `format`, `use_server_vad`, `buffer_size`, "
                "`window_max_s`", "the greeting"),
        Message('{"is_partial": true}', "server", "`text`, `is_partial`, `is_final`",
                "the utterance so far, replacing the partial before it"),
        Message('{"is_final": true}', "server", "`text`, `is_partial`, `is_final`",
                "the utterance's transcript, on `flush` or where voice activity heard speech stop"),
        Message('{"status": "buffer_reset"}', "server", "", "the utterance was dropped"),
        Message('{"status": "configured"}', "server", "`language`, `use_server_vad`", "the settings as taken"),
        Message('{"code": ...}', "server", "`code`, `message`, `statusCode`", "an error; the session goes on"),
    ),
)  # fmt: skip


def error_message(code: str, message: str, status: int) -> dict:
    return {"code": code, "message": message, "statusCode": status}


def typed_error_message(error: TTSError) -> dict:
    return error_message((error.flat_code or error.code).upper(), str(error), error.status)


@router.websocket("/ws/transcribe")
async def transcribe_ws(websocket: WebSocket, services: ServicesDep) -> None:
    settings = services.settings
    if not await accepted(websocket, settings.accepted_keys()):
        return
    query = websocket.query_params
    try:
        rate = int(query.get("sample_rate", "16000"))
        if rate not in RATES:
            raise ValueError
        hosted = route_recognizer(services.registry, query.get("model"))
        language = resolve_language(query.get("language"))
    except ValueError:
        reason = f"sample_rate is a whole number of Hz from 8000 to 48000, not {query.get('sample_rate')!r}"
        await websocket.send_json(error_message("UNSUPPORTED_SAMPLE_RATE", reason, 400))
        await close_quietly(websocket, 1008)
        return
    except TTSError as error:
        await websocket.send_json(typed_error_message(error))
        await close_quietly(websocket, 1008)
        return
    use_vad = truthy(query["use_server_vad"]) if "use_server_vad" in query else settings.live_server_vad
    service = services.recognition[hosted.id]
    session = LiveSession(
        service.engine,
        rate,
        language,
        "",
        voice_activity(settings, use_vad),
        settings.live_max_pending_seconds,
        slots=service.live_slots,
    )
    try:
        await session.start()
    except TTSError as error:  # every live session slot taken, or the model could not load
        await websocket.send_json(typed_error_message(error))
        await close_quietly(websocket, refusal_close_code(error))
        return
    greeting = {"status": "connected", "sample_rate": rate, "format": "pcm_s16le", "use_server_vad": use_vad}
    buffer_size = 2 * session.streaming.chunk_samples * rate // 16000
    await websocket.send_json(greeting | {"buffer_size": buffer_size, "window_max_s": session.max_utterance_seconds})
    idle = IdleClock(settings.live_idle_timeout)
    sender = asyncio.create_task(_send_events(websocket, session, idle))
    state = _Connection(session, settings, language, use_vad)
    try:
        while (message := await idle.receive(websocket))["type"] != "websocket.disconnect":
            if message.get("bytes") is not None:
                reply = state.audio(message["bytes"])
                useful = bool(message["bytes"]) and reply is None
            else:
                reply = state.action(message.get("text") or "")
                useful = reply is None or "code" not in reply  # taken, not refused
            if useful:
                idle.touch()
            if reply is not None:
                await websocket.send_json(reply)
    except IdleTimeoutError as error:
        with contextlib.suppress(WebSocketDisconnect, WebSocketDisconnected, RuntimeError):
            await websocket.send_json(typed_error_message(error))
            await close_quietly(websocket, IDLE_CLOSE_CODE)
    except (WebSocketDisconnect, WebSocketDisconnected):
        pass
    finally:  # the client is gone (or idle): its held and queued audio is dropped, its slot given back at once
        await session.cancel()
        await sender


class _Connection:
    """A connection's audio and actions, turned into the session's."""

    def __init__(self, session: LiveSession, settings: Settings, language: str | None, use_vad: bool):
        self.session, self.settings, self.language, self.use_vad = session, settings, language, use_vad
        self.odd = b""  # a frame's last byte when it split a sample

    def audio(self, data: bytes) -> dict | None:
        data, self.odd = self.odd + data, b""
        if len(data) % 2:
            data, self.odd = data[:-1], data[-1:]
        try:
            self.session.append(pcm_samples(data, 2, 1))
        except TTSError as error:
            return typed_error_message(error)
        return None

    def action(self, text: str) -> dict | None:
        try:
            command = json.loads(text)
        except (ValueError, RecursionError):  # not JSON, nested too deep, or an integer of too many digits
            return error_message("INVALID_JSON", "Invalid JSON command", 400)
        if not isinstance(command, dict):
            return error_message("INVALID_JSON", "a command is a JSON object with an action", 400)
        action = command.get("action", "")
        if action == "flush":
            self.session.commit()
            return None
        if action == "reset":
            self.session.clear()
            return {"status": "buffer_reset"}
        if action == "config":
            return self.configure(command)
        return error_message("UNKNOWN_ACTION", f"Unknown action: {shown(action)}", 400)

    def configure(self, command: dict) -> dict:
        try:
            fields = checked(ConfigAction, command)
            if "language" in fields.model_fields_set:
                self.language = resolve_language(fields.language)
        except TTSError as error:
            return typed_error_message(error)
        if "use_server_vad" in fields.model_fields_set:
            self.use_vad = truthy(fields.use_server_vad)
        self.session.configure(self.language, "", voice_activity(self.settings, self.use_vad))
        shown = fields.language if self.language else "auto"
        return {"status": "configured", "language": shown, "use_server_vad": self.use_vad}


async def _send_events(websocket: WebSocket, session: LiveSession, idle: IdleClock) -> None:
    """Partials (when they have text) and finals as the earlier server's frames (of use: `live_idle.py`); errors as
    its error frames."""
    open_ = True
    while (event := await session.events.get()) is not None:
        if isinstance(event, TTSError | PassFailed):
            frame = typed_error_message(event if isinstance(event, TTSError) else event.error)
        elif isinstance(event, LiveTranscript) and (event.final or event.text):
            frame = {"text": event.text, "is_partial": not event.final, "is_final": event.final}
        else:
            continue  # speech boundaries have no frame in this protocol
        if open_:
            with contextlib.suppress(WebSocketDisconnect, WebSocketDisconnected, RuntimeError):
                await websocket.send_json(frame)
                if "text" in frame:
                    idle.touch()
                continue
            open_ = False
        log.info("ws/transcribe: the client left before this frame: %r", frame)
