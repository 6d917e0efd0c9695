"""What the tests of other providers' listening sockets (Deepgram's, Cartesia's) send and read raw: 16-bit PCM, and
every message the server sends for a client's messages until it closes."""

from __future__ import annotations

import json

import numpy as np
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed


def pcm(wave: np.ndarray) -> bytes:
    """Float samples as 16-bit little-endian PCM."""
    return (np.clip(wave, -1, 1) * 32767).astype("<i2").tobytes()


async def exchange(url: str, headers: dict[str, str], chunks: list[bytes | str]) -> tuple[list[dict], int | None]:
    """Every message the server sends for `chunks` (audio, or a text message), until it closes; its close code."""
    messages = []
    async with connect(url, additional_headers=headers, max_size=None) as ws:
        for chunk in chunks:
            await ws.send(chunk)
        try:
            async for message in ws:
                messages.append(json.loads(message))
        except ConnectionClosed:
            pass
        return messages, ws.close_code
