"""A real `qwen3-tts-server serve` subprocess on a free loopback port, for tests and benchmarks."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def live_server(
    model: str | Path, *args: str, env: dict[str, str] | None = None, ready_within: float = 120
) -> Iterator[str]:
    """Start the server on `model` with extra CLI `args`, wait for /ready, yield its base URL, stop it on exit.
    Server output goes to a pipe; it is raised with the error if the server dies before it is ready. Unless
    `env` names a DATA_DIR, the voice library lives in a temporary directory removed afterwards."""
    with (
        tempfile.TemporaryDirectory(prefix="qwen3-tts-data-") as scratch,
        _serve(model, args, {"DATA_DIR": scratch, **(env or {})}, ready_within) as base,
    ):
        yield base


@contextmanager
def _serve(model: str | Path, args: tuple[str, ...], env: dict[str, str], ready_within: float) -> Iterator[str]:
    port = free_port()
    command = [sys.executable, "-m", "qwen3_tts_server", "serve", "--model", str(model), "--port", str(port), *args]
    server = subprocess.Popen(
        command,
        env={**os.environ, "HF_HUB_OFFLINE": "1", **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + ready_within
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"the server exited with {server.returncode}:\n{server.stdout.read()}")
            try:
                if httpx.get(f"{base}/ready", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"the server was not ready within {ready_within} s")
            time.sleep(0.2)
        yield base
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
