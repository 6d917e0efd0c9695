"""Cartesia's listening sockets, for clients that speak Cartesia (LiveKit's and Pipecat's Cartesia plugins with their
base URL set to this server; protocols in service/recognition/cartesia.py), served as every provider's live socket
is (`provider_sockets.py`). The key is taken from `X-API-Key` as from `Bearer`; Cartesia's version (header or
`cartesia_version` query) changes nothing."""

from __future__ import annotations

from fastapi import APIRouter, WebSocket

from ...service.recognition.cartesia import CartesiaListener, error_message, stt_options
from ...service.recognition.routing import route_recognizer
from ..dependencies import Services, ServicesDep
from .live_idle import EventSender
from .provider_sockets import serve_listener

router = APIRouter()


async def _serve(websocket: WebSocket, services: Services, turns: bool) -> None:
    def listener(send: EventSender) -> CartesiaListener:
        options = stt_options(websocket.query_params.multi_items())
        service = services.recognition[route_recognizer(services.registry, options.model).id]
        return CartesiaListener(service, options, send, services.settings.live_max_pending_seconds, turns)

    await serve_listener(websocket, services, listener, error_message, "error")


@router.websocket("/stt/websocket")
async def stt_socket(websocket: WebSocket, services: ServicesDep) -> None:
    await _serve(websocket, services, turns=False)


@router.websocket("/stt/turns/websocket")
async def turns_socket(websocket: WebSocket, services: ServicesDep) -> None:
    await _serve(websocket, services, turns=True)
