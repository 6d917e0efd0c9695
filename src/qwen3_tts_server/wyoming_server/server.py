"""The Wyoming TCP server and its optional mDNS advertisement, as an async context manager: entering listens (port
0 picks a free port, `port` then holds it), leaving stops listening and closes every connection, which cancels
their engine jobs."""

from __future__ import annotations

import asyncio
import logging
from functools import partial
from typing import cast

from wyoming.server import AsyncTcpServer

from ..wyoming_advertisement import WyomingAdvertisement
from .backend import WyomingBackend
from .handler import WyomingHandler

log = logging.getLogger(__name__)


class WyomingServer:
    def __init__(self, backend: WyomingBackend, host: str, port: int, zeroconf: bool = False):
        self.backend = backend
        self.host = host
        self.port = port
        self.zeroconf = zeroconf
        self._tcp = AsyncTcpServer(host, port)
        self._connections: set[asyncio.Task] = set()
        self._advertisement = WyomingAdvertisement()

    async def __aenter__(self) -> WyomingServer:
        await self._tcp.start(partial(WyomingHandler, backend=self.backend, connections=self._connections))
        listening = cast(asyncio.Server, self._tcp._server)
        self.port = listening.sockets[0].getsockname()[1]
        log.info("wyoming listening on %s:%d", self.host, self.port, extra={"host": self.host, "port": self.port})
        if self.zeroconf:
            await self._advertisement.advertise(self.host, self.port)
        return self

    @property
    def advertised(self) -> str | None:
        """The mDNS service name, once advertised."""
        return self._advertisement.name

    def stop_accepting(self) -> None:
        """Close the listening socket (a graceful stop has begun); the connections open go on until the exit."""
        listening = self._tcp._server
        if listening is not None:
            listening.close()

    async def __aexit__(self, *_) -> None:
        await self._advertisement.withdraw()
        await self._tcp.stop()  # no new connections; each open one is told to stop reading
        connections = list(self._connections)
        for task in connections:  # one waiting for its client to read would wait on
            task.cancel()
        await asyncio.gather(*connections, return_exceptions=True)
