"""A real `qwen3-tts-server gateway` subprocess on a free loopback port, for tests and benchmarks: ready as soon
as the gateway listens (its worker starts with the first proxied request)."""

from __future__ import annotations

import functools

from .live_server import LiveProcess, live_process

LiveGateway = LiveProcess
live_gateway = functools.partial(live_process, "gateway")
