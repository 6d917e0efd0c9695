"""The gateway's Wyoming port: it owns the port, starts the worker on the first connection and relays each
connection's bytes to the worker's own Wyoming port unchanged, in both directions, as they come. The worker is
leased for as long as a connection is open, so it is not stopped for idleness under a Home Assistant client."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from ..wyoming_advertisement import WyomingAdvertisement
from .settings import GatewaySettings
from .worker import Worker, WorkerUnavailable

log = logging.getLogger("qwen3_tts_server.gateway.wyoming")
RELAY_CHUNK = 1 << 16


class WyomingRelay:
    def __init__(self, settings: GatewaySettings, worker: Worker) -> None:
        self.settings = settings
        self.worker = worker
        self.server: asyncio.Server | None = None
        self.connections: set[asyncio.Task[None]] = set()
        self.advertisement = WyomingAdvertisement()

    async def start(self) -> None:
        host = self.settings.wyoming_host or self.settings.host
        self.server = await asyncio.start_server(self._accepted, host, self.settings.wyoming_port)
        port = self.server.sockets[0].getsockname()[1]
        log.info("wyoming listening", extra={"fields": {"host": host, "port": port}})
        if self.settings.wyoming_zeroconf:
            await self.advertisement.advertise(host, port)

    def stop_accepting(self) -> None:
        """A graceful stop has begun: no new connection; those open go on."""
        if self.server is not None:
            self.server.close()

    async def close(self) -> None:
        """Stop accepting; connections still open get SHUTDOWN_GRACE s to finish, then are cut."""
        if self.server is None:
            return
        await self.advertisement.withdraw()
        self.server.close()
        if self.connections:
            await asyncio.wait(self.connections, timeout=self.settings.shutdown_grace)
        for connection in self.connections:
            connection.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*self.connections, return_exceptions=True)
        await self.server.wait_closed()

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.connections.add(task)
        try:
            async with self.worker.lease() as upstream:
                if upstream.wyoming_port is None:
                    raise WorkerUnavailable("the worker serves no Wyoming port")
                worker_reader, worker_writer = await asyncio.open_connection(upstream.host, upstream.wyoming_port)
                try:
                    await _relay_both_ways(reader, writer, worker_reader, worker_writer)
                finally:
                    worker_writer.close()
        except (WorkerUnavailable, OSError) as exc:
            log.warning("wyoming connection refused: %s", exc)
            from wyoming.error import Error
            from wyoming.event import async_write_event

            with contextlib.suppress(OSError):
                await async_write_event(Error(text=f"no worker: {exc}", code="worker_unavailable").event(), writer)
        finally:
            self.connections.discard(task)
            writer.close()


async def _relay_both_ways(
    client_reader: asyncio.StreamReader,
    client_writer: asyncio.StreamWriter,
    worker_reader: asyncio.StreamReader,
    worker_writer: asyncio.StreamWriter,
) -> None:
    """Until either side closes: the other side's write end is then closed, and the relay ends."""
    to_worker = asyncio.create_task(_pipe(client_reader, worker_writer))
    to_client = asyncio.create_task(_pipe(worker_reader, client_writer))
    try:
        await asyncio.wait({to_worker, to_client}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (to_worker, to_client):
            task.cancel()
        await asyncio.gather(to_worker, to_client, return_exceptions=True)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError):
        while data := await reader.read(RELAY_CHUNK):
            writer.write(data)
            await writer.drain()
