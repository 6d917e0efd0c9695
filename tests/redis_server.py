"""A throwaway redis-server for the tests (the CI installs it from Debian packages)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from collections.abc import Iterator

import pytest
import redis

from qwen3_tts_server.testing.live_server import free_port


class RedisServer:
    """A throwaway redis-server on a free port, no persistence."""

    def __init__(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail("redis-server is not on PATH: the Redis cache tests need it (apt-get install redis-server)")
        self.binary = binary
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + 10
        try:
            while True:
                try:
                    if client.ping():
                        return
                except redis.ConnectionError:
                    if self.process.poll() is not None or time.monotonic() > deadline:
                        pytest.fail(f"redis-server did not come up on port {self.port}")
                    time.sleep(0.02)
        finally:
            client.close()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)  # a paused server would not act on the SIGTERM
            self.process.terminate()
            self.process.wait(timeout=10)
        self.process = None

    def pause(self) -> None:
        """Freeze the server (SIGSTOP): the kernel still accepts connections, nothing answers (a hung Redis)."""
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.process.send_signal(signal.SIGCONT)

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url)


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
