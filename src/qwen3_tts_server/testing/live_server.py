"""A real `qwen3-tts-server serve` (or `gateway`) subprocess on a free loopback port or a Unix socket, over HTTP
or HTTPS, for tests and benchmarks."""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass(frozen=True)
class TLSFiles:
    """A private key and its certificate (PEM), given to the server as SSL_KEYFILE and SSL_CERTFILE; the test
    clients trust the certificate itself (a self-signed one for 127.0.0.1)."""

    keyfile: Path
    certfile: Path

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=self.certfile)


@dataclass
class LiveProcess:
    base: str  # http(s)://127.0.0.1:PORT, or http(s)://localhost over `uds`
    process: subprocess.Popen
    log_path: Path  # the process's stdout and stderr
    uds: str | None = None
    verify: ssl.SSLContext | bool = True  # how its clients check its certificate (HTTPS)

    def client(self, **options) -> httpx.Client:
        transport = httpx.HTTPTransport(uds=self.uds, verify=self.verify) if self.uds else None
        return httpx.Client(base_url=self.base, transport=transport, verify=self.verify, **options)

    def health(self) -> dict:
        with self.client(timeout=30) as client:
            return client.get("/health").json()

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]


@contextmanager
def live_process(
    command: str,
    model: str | Path,
    *args: str,
    env: dict[str, str] | None = None,
    ready_within: float = 120,
    uds: bool = False,
    tls: TLSFiles | None = None,
    launcher: tuple[str, ...] = ("-m", "qwen3_tts_server"),
) -> Iterator[LiveProcess]:
    """Run `qwen3-tts-server COMMAND --model MODEL ARGS` (on a Unix socket with `uds`, over HTTPS with `tls`;
    `launcher`: the interpreter's arguments that run the CLI), wait for /ready, yield it, and stop it on exit
    (SIGTERM, then SIGKILL after 60 s). Unless `env` names a DATA_DIR, the voice library lives in a temporary
    directory removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="qwen3-tts-") as scratch:
        scheme = "https" if tls else "http"
        if uds:
            where = ["--uds", os.path.join(scratch, "s.sock")]
            base = f"{scheme}://localhost"
        else:
            port = free_port()
            where, base = ["--port", str(port)], f"{scheme}://127.0.0.1:{port}"
        if tls:
            env = {"SSL_KEYFILE": str(tls.keyfile), "SSL_CERTFILE": str(tls.certfile), **(env or {})}
        log_path = Path(scratch) / "server.log"
        argv = [sys.executable, *launcher, command, "--model", str(model), *where, *args]
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                argv,
                env={**os.environ, "HF_HUB_OFFLINE": "1", "DATA_DIR": scratch, **(env or {})},
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        live = LiveProcess(base, process, log_path, where[1] if uds else None, tls.client_context() if tls else True)
        try:
            _wait_ready(live, ready_within)
            yield live
        finally:
            process.terminate()
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_ready(live: LiveProcess, within: float) -> None:
    deadline = time.monotonic() + within
    with live.client(timeout=1) as client:
        while True:
            if live.process.poll() is not None:
                raise RuntimeError(f"the server exited with {live.process.returncode}:\n{live.log_tail()}")
            try:
                if client.get("/ready").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"the server was not ready within {within} s:\n{live.log_tail()}")
            time.sleep(0.2)


@contextmanager
def live_server(
    model: str | Path, *args: str, env: dict[str, str] | None = None, ready_within: float = 120
) -> Iterator[str]:
    """`serve` on `model`, loaded and warmed up before it says ready, with extra CLI `args` on a free port;
    yields its base URL."""
    with live_process("serve", model, "--preload-model", *args, env=env, ready_within=ready_within) as live:
        yield live.base
