"""WS /v1/audio/speech/ws: real-time speech with incremental text and barge-in (protocol in
service/speech/realtime.py)."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from pydantic import ValidationError
from starlette.websockets import WebSocketDisconnected

from ...errors import invalid_value
from ...service.speech.realtime import ChannelClosed, RealtimeSession
from ...service.speech.requests import SynthesisRequest
from ..dependencies import ServicesDep
from ..websockets import accepted
from .schemas import SpeechRequest

router = APIRouter()


def parse_request(config: dict[str, Any], text: str) -> SynthesisRequest:
    """A session config and a text, validated as a POST /v1/audio/speech body would be."""
    try:
        return SpeechRequest.model_validate({**config, "input": text}).synthesis()
    except ValidationError as exc:
        raise invalid_value(exc.errors()) from None


class SocketChannel:
    """The WebSocket as the session's channel: events as JSON text messages, audio as binary ones; a send on a
    closed socket raises ChannelClosed."""

    def __init__(self, websocket: WebSocket):
        self.websocket = websocket

    async def send_event(self, payload: dict) -> None:
        try:
            await self.websocket.send_text(json.dumps(payload, ensure_ascii=False))
        except (WebSocketDisconnect, WebSocketDisconnected) as exc:
            raise ChannelClosed from exc

    async def send_audio(self, data: bytes) -> None:
        try:
            await self.websocket.send_bytes(data)
        except (WebSocketDisconnect, WebSocketDisconnected) as exc:
            raise ChannelClosed from exc


@router.websocket("/v1/audio/speech/ws")
async def speech_ws(websocket: WebSocket, services: ServicesDep) -> None:
    if not await accepted(websocket, services.settings.accepted_keys()):
        return
    limit = services.settings.max_pending_text
    async with RealtimeSession(services.speech, SocketChannel(websocket), parse_request, limit) as session:
        try:
            while (message := await websocket.receive())["type"] != "websocket.disconnect":
                await session.handle(message.get("text"))
        except (WebSocketDisconnect, ChannelClosed):  # gone while we answered: leaving the session cancels its jobs
            pass
