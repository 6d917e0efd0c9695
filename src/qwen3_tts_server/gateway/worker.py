"""The worker supervisor: one `serve` subprocess, started on the first request, checked with /ready, stopped
after IDLE_TIMEOUT without work, and started again on the next request after a stop or a crash."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Literal

from .settings import GatewaySettings

if TYPE_CHECKING:
    from .upstream import Upstream

log = logging.getLogger("qwen3_tts_server.gateway")
READY_POLL = 0.1  # seconds between /ready probes while the worker starts
PR_SET_PDEATHSIG = 1  # prctl option, Linux

WorkerState = Literal["stopped", "starting", "running", "stopping"]


class WorkerUnavailable(Exception):
    """No worker to send a request to: it exited before it was ready, or was not ready in time."""


class Worker:
    def __init__(self, settings: GatewaySettings, argv: list[str]) -> None:
        self.settings = settings
        self.argv = argv
        self.starts = 0
        self.restarts = 0
        self.in_flight = 0
        self.process: asyncio.subprocess.Process | None = None
        self._upstream: Upstream | None = None  # set while the worker is ready
        self._exited: asyncio.Task[int] | None = None  # reaps the current process
        self._starting: asyncio.Task[None] | None = None
        self._stopping: asyncio.Task[None] | None = None
        self._crashed = False
        self._last_active = time.monotonic()

    @property
    def state(self) -> WorkerState:
        if self._stopping is not None:
            return "stopping"
        if self._starting is not None:
            return "starting"
        return "running" if self._upstream is not None else "stopped"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @contextlib.asynccontextmanager
    async def lease(self) -> AsyncIterator[Upstream]:
        """The running worker for one request or WebSocket, started if need be; while leased it is not
        stopped for idleness. Raises WorkerUnavailable."""
        self.in_flight += 1
        try:
            yield await self._running()
        finally:
            self.in_flight -= 1
            self._last_active = time.monotonic()

    async def health(self) -> dict | None:
        """The worker's own /health, or None when it is not running (never starts it)."""
        upstream = self._upstream
        return None if upstream is None else await upstream.health()

    async def metrics(self) -> str | None:
        """The worker's own /metrics, or None when it is not running (never starts it)."""
        upstream = self._upstream
        return None if upstream is None else await upstream.metrics()

    async def stop_when_idle(self) -> None:
        """Runs for the gateway's lifetime: stops the worker after IDLE_TIMEOUT s without a request."""
        timeout = self.settings.idle_timeout
        if timeout <= 0:
            return
        while True:
            await asyncio.sleep(min(1.0, timeout / 4))
            idle = time.monotonic() - self._last_active
            if self.state == "running" and self.in_flight == 0 and idle >= timeout:
                log.info("worker idle for %.0f s: stopping it", idle, extra={"fields": {"worker_pid": self.pid}})
                await self.stop()

    async def stop(self) -> None:
        """SIGTERM, SHUTDOWN_GRACE + 5 s to exit, then SIGKILL. Requests arriving meanwhile wait, then start
        a new worker."""
        if self._stopping is None:
            self._stopping = asyncio.create_task(self._stop())
        await asyncio.shield(self._stopping)

    async def close(self) -> None:
        """At the gateway's exit: abandon a start in progress and stop the worker."""
        if self._starting is not None:
            self._starting.cancel()
            with contextlib.suppress(BaseException):
                await self._starting
        await self.stop()

    async def _running(self) -> Upstream:
        if self._stopping is not None:
            await asyncio.shield(self._stopping)
        if self._upstream is None:
            if self._starting is None:  # concurrent first requests share this one start
                self._starting = asyncio.create_task(self._start())
            await asyncio.shield(self._starting)
        if self._upstream is None:
            raise WorkerUnavailable("the worker exited right after it started")
        return self._upstream

    async def _start(self) -> None:
        try:
            host = self.settings.worker_host
            port = self.settings.worker_port or _free_port(host)
            # The worker inherits the environment and the gateway's flags; these later flags override both. It is
            # the gateway's private upstream on the loopback, so plain HTTP: the gateway alone terminates TLS.
            command = [sys.executable, "-m", "qwen3_tts_server", "serve", *self.argv, "--no-gateway-mode"]
            command += ["--host", host, "--port", str(port), "--uds", "", "--idle-timeout", "0", "--preload-model"]
            command += ["--ssl-keyfile", "", "--ssl-certfile", ""]
            # The gateway owns the public Wyoming port and advertises it; the worker's own is private.
            wyoming_port = None if self.settings.wyoming_port is None else _free_port(host)
            command += ["--wyoming-port", "" if wyoming_port is None else str(wyoming_port)]
            command += ["--wyoming-host", host, "--no-wyoming-zeroconf"]
            process = await asyncio.create_subprocess_exec(
                *command,
                stdin=asyncio.subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl-C reaches the gateway only, which then stops the worker
                preexec_fn=_die_with_parent(),
            )
            self.process = process
            self._exited = exited = asyncio.create_task(self._reap(process))
            self.starts += 1
            if self._crashed:
                self.restarts += 1
                self._crashed = False
            log.info("worker starting", extra={"fields": {"worker_pid": process.pid, "port": port}})
            started = time.monotonic()
            from .upstream import Upstream  # the HTTP client library is loaded with the first worker

            upstream = Upstream(host, port, wyoming_port)
            try:
                await self._wait_ready(upstream, exited)
            except BaseException:
                await upstream.aclose()
                raise
            self._upstream = upstream
            self._last_active = time.monotonic()
            elapsed = round(self._last_active - started, 2)
            log.info("worker ready", extra={"fields": {"worker_pid": process.pid, "seconds": elapsed}})
        except BaseException as exc:
            log.error("worker failed to start: %s", exc or type(exc).__name__)
            await self.stop()
            raise
        finally:
            self._starting = None

    async def _wait_ready(self, upstream: Upstream, exited: asyncio.Task[int]) -> None:
        deadline = time.monotonic() + self.settings.worker_start_timeout
        while True:
            if await upstream.ready():
                return
            if exited.done():
                raise WorkerUnavailable(f"the worker exited with code {exited.result()} before it was ready")
            if time.monotonic() > deadline:
                raise WorkerUnavailable(f"the worker was not ready within {self.settings.worker_start_timeout} s")
            await asyncio.sleep(READY_POLL)

    async def _reap(self, process: asyncio.subprocess.Process) -> int:
        code = await process.wait()
        if process is self.process and self._stopping is None:  # not stopped by us: a crash
            log.warning("worker exited unexpectedly", extra={"fields": {"worker_pid": process.pid, "code": code}})
            self._crashed = True
            upstream, self._upstream, self.process = self._upstream, None, None
            if upstream is not None:
                await upstream.aclose()
        return code

    async def _stop(self) -> None:
        try:
            upstream, process, exited = self._upstream, self.process, self._exited
            self._upstream = None
            if process is not None and exited is not None:
                with contextlib.suppress(ProcessLookupError):
                    process.terminate()
                try:
                    await asyncio.wait_for(asyncio.shield(exited), self.settings.shutdown_grace + 5)
                except asyncio.TimeoutError:
                    log.warning("worker ignored SIGTERM: killing it", extra={"fields": {"worker_pid": process.pid}})
                    with contextlib.suppress(ProcessLookupError):
                        process.kill()
                    await exited
                log.info("worker stopped", extra={"fields": {"worker_pid": process.pid, "code": exited.result()}})
            if upstream is not None:
                await upstream.aclose()
        finally:
            self.process = None
            self._stopping = None


def _free_port(host: str) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def _die_with_parent() -> Callable[[], None] | None:
    """A pre-exec hook that has the worker sent SIGTERM when the gateway dies, even by SIGKILL (Linux), so
    that no orphan keeps the model loaded. ctypes is loaded here, in the gateway, only once a worker starts."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    def hook() -> None:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)

    return hook
