"""Server settings: where the server listens (TCP, a Unix socket, the Wyoming port) and how long and how many
connections it keeps."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field

from .group import EMPTY_UNSETS, SettingsGroup


class ServerSettings(SettingsGroup):
    """Where the server listens and the connections it keeps."""

    title = "Server"

    host: str = Field("127.0.0.1", description="address to listen on (0.0.0.0 for every interface)")
    port: int = Field(8000, ge=0, le=65535, description="TCP port")
    unix_socket_path: Annotated[Path | None, EMPTY_UNSETS] = Field(
        None, description="listen on this Unix socket instead of host:port"
    )
    wyoming_port: Annotated[int | None, EMPTY_UNSETS] = Field(
        None,
        ge=0,
        le=65535,
        description="also serve the Wyoming protocol (Home Assistant) on this TCP port, e.g. 10200; no API key "
        "applies there: local network only",
    )
    wyoming_host: Annotated[str | None, EMPTY_UNSETS] = Field(
        None, description="address the Wyoming port listens on (default: HOST; 0.0.0.0 for Home Assistant elsewhere)"
    )
    wyoming_zeroconf: bool = Field(
        False, description="advertise the Wyoming port over mDNS for Home Assistant discovery"
    )
    max_websockets: int = Field(
        256, ge=0, description="open WebSocket connections; past it a new one is closed with 1013; 0 no limit"
    )
    body_timeout: float = Field(
        30.0, gt=0, description="seconds a client may take to send a request body; past it a 408"
    )
    send_buffer_bytes: int = Field(
        131072,
        ge=0,
        description="each connection's kernel send buffer (SO_SNDBUF; Linux keeps twice this): what a client that "
        "stops reading holds up beyond STREAM_BUFFER_SECONDS (0: the OS's own, which grows to MBs)",
    )
    timeout_keep_alive: float = Field(
        65.0, gt=0, description="seconds an idle keep-alive connection stays open (above load balancers' 60 s)"
    )
