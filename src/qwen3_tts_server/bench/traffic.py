"""Mixed client traffic against a live server, sent as real clients send it: streamed, whole-file and SSE speech,
WebSocket sessions (half of them cancelled mid-speech), inline clones, repeats the output cache answers, and
clients that leave at a random byte. Shared by the leak test and the soak benchmark (benchmarks/soak.py).

Every request but the `cache_hit` kind gets its own seed, so that it is generated, not replayed from the output
cache. Every request is checked: a kind's expected answer is an outcome without `error`; anything else is named by
kind in `error` (`http_503:server_busy`, `sse_error:timeout`, `ws_error:...`, `bad_audio`, `ReadTimeout`...).
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import random
import time
from dataclasses import dataclass
from typing import Any

import httpx
import numpy as np
import soundfile
from websockets.asyncio.client import connect

# The mix, by weight: one client in ten leaves early (`leaves`, and the cancelled half of `websocket`).
MIX = {"streamed": 25, "whole": 15, "sse": 10, "websocket": 10, "clone": 10, "cache_hit": 15, "leaves": 10}
PCM_BYTES_PER_SAMPLE = 2
LEAVE_BY_BYTE = 40_000  # a client that leaves does so at a random byte up to this one
TEXTS = (
    "Good morning, and welcome aboard.",
    "The meeting moved to three o'clock on Thursday.",
    "Please hold while I connect your call.",
    "Rain is expected later this evening, so bring an umbrella.",
    "Your order number is 4 8 1 5.",
    "Thank you for waiting, the next agent is free.",
)
CACHED_TEXTS = TEXTS[:2]  # spoken again and again with one seed: after the first, the output cache answers


@dataclass
class Outcome:
    kind: str
    started: float  # time.monotonic() when it was sent
    seconds: float  # until its last byte, or its error
    first_audio: float | None = None  # seconds until its first audio byte
    audio_bytes: int = 0
    cache: str | None = None  # X-Cache: hit, miss
    error: str | None = None


@dataclass
class Traffic:
    """One client per request over a shared connection pool; `voice` is a library voice (or a preset speaker),
    `references` WAV recordings for inline clones."""

    base: str
    voice: str
    references: list[bytes]
    client: httpx.AsyncClient
    timeout: float = 120.0

    @classmethod
    def open(cls, base: str, voice: str, references: list[bytes], timeout: float = 120.0) -> Traffic:
        limits = httpx.Limits(max_connections=256, max_keepalive_connections=32)
        return cls(base, voice, references, httpx.AsyncClient(base_url=base, timeout=timeout, limits=limits), timeout)

    async def aclose(self) -> None:
        await self.client.aclose()

    async def send(self, kind: str, rng: random.Random) -> Outcome:
        """One request of `kind`, checked; never raises (a failure is the outcome's `error`)."""
        outcome = Outcome(kind, time.monotonic(), 0.0)
        try:
            await asyncio.wait_for(getattr(self, f"_{kind}")(outcome, rng), self.timeout)
        except Exception as exc:  # what a client sees: a timeout, a reset, a protocol error
            outcome.error = outcome.error or type(exc).__name__
        outcome.seconds = time.monotonic() - outcome.started
        return outcome

    def _speech(self, rng: random.Random, **fields: Any) -> dict[str, Any]:
        """A request body: a text of TEXTS with a seed of its own (else `fields` give both)."""
        body = {"model": "tts-1", "input": rng.choice(TEXTS), "voice": self.voice, "response_format": "pcm"}
        return {**body, "seed": _fresh_seed(rng), **fields}

    def _first_audio(self, outcome: Outcome, data: bytes) -> None:
        if data and outcome.first_audio is None:
            outcome.first_audio = time.monotonic() - outcome.started
        outcome.audio_bytes += len(data)

    async def _streamed(self, outcome: Outcome, rng: random.Random, leave_at: int | None = None) -> None:
        body = self._speech(rng, stream=True)
        async with self.client.stream("POST", "/v1/audio/speech", json=body) as response:
            if not await _accepted(response, outcome):
                return
            async for data in response.aiter_bytes():
                self._first_audio(outcome, data)
                if leave_at is not None and outcome.audio_bytes >= leave_at:
                    return  # the client leaves: the connection closes mid-stream
        if outcome.audio_bytes == 0 or outcome.audio_bytes % PCM_BYTES_PER_SAMPLE:
            outcome.error = "bad_audio"

    async def _leaves(self, outcome: Outcome, rng: random.Random) -> None:
        await self._streamed(outcome, rng, leave_at=rng.randint(1, LEAVE_BY_BYTE))

    async def _whole(self, outcome: Outcome, rng: random.Random, **fields: Any) -> None:
        body = self._speech(rng, stream=False, response_format="wav", **fields)
        response = await self.client.post("/v1/audio/speech", json=body)
        if await _accepted(response, outcome):
            self._check_wav(outcome, response)

    async def _cache_hit(self, outcome: Outcome, rng: random.Random) -> None:
        await self._whole(outcome, rng, input=rng.choice(CACHED_TEXTS), seed=1)

    async def _clone(self, outcome: Outcome, rng: random.Random) -> None:
        fields = {"input": rng.choice(TEXTS), "response_format": "wav", "stream": "false", "mode": "x_vector"}
        fields["seed"] = str(_fresh_seed(rng))
        files = {"ref_audio": ("reference.wav", rng.choice(self.references), "audio/wav")}
        response = await self.client.post("/v1/audio/speech/clone", data=fields, files=files)
        if await _accepted(response, outcome):
            self._check_wav(outcome, response)

    def _check_wav(self, outcome: Outcome, response: httpx.Response) -> None:
        outcome.cache = response.headers.get("x-cache")
        audio, _ = soundfile.read(io.BytesIO(response.content), dtype="float32")
        outcome.first_audio = time.monotonic() - outcome.started
        outcome.audio_bytes = len(response.content)
        if len(audio) == 0 or not abs(audio).max() <= 1.0:
            outcome.error = "bad_audio"

    async def _sse(self, outcome: Outcome, rng: random.Random) -> None:
        body = self._speech(rng, stream_format="sse")
        done = False
        async with self.client.stream("POST", "/v1/audio/speech", json=body) as response:
            if not await _accepted(response, outcome):
                return
            async for line in response.aiter_lines():
                if not line.startswith("data: "):
                    continue
                event = json.loads(line.removeprefix("data: "))
                if event["type"] == "speech.audio.delta":
                    self._first_audio(outcome, base64.b64decode(event["audio"]))
                elif event["type"] == "error":
                    outcome.error = f"sse_error:{event['error']['code']}"
                    return
                done = done or event["type"] == "speech.audio.done"
        if not done or outcome.audio_bytes == 0:
            outcome.error = "bad_audio"

    async def _websocket(self, outcome: Outcome, rng: random.Random) -> None:
        """Text in two appends and a commit; half of the sessions cancel at their first audio (barge-in)."""
        cancel = rng.random() < 0.5
        url = self.base.replace("http", "ws", 1) + "/v1/audio/speech/ws"
        async with connect(url, open_timeout=self.timeout) as ws:
            await ws.send(json.dumps({"type": "session.update", "voice": self.voice, "seed": _fresh_seed(rng)}))
            first, rest = _halves(rng.choice(TEXTS))
            await ws.send(json.dumps({"type": "input_text.append", "text": first}))
            await ws.send(json.dumps({"type": "input_text.append", "text": rest}))
            await ws.send(json.dumps({"type": "input_text.commit"}))
            async for message in ws:
                if isinstance(message, bytes):
                    self._first_audio(outcome, message)
                    if cancel and outcome.audio_bytes == len(message):
                        await ws.send(json.dumps({"type": "cancel"}))
                    continue
                event = json.loads(message)
                if event["type"] == "error":
                    outcome.error = f"ws_error:{event['error']['code']}"
                    return
                if event["type"] == ("cancelled" if cancel else "done"):
                    return


def reference_wav(seconds: float = 10.0, rate: int = 44100, pitch: float = 140.0) -> bytes:
    """A speech-like stereo recording to clone: a gliding harmonic tone under a syllable-rate envelope."""
    t = np.arange(int(seconds * rate)) / rate
    phase = 2 * np.pi * np.cumsum(pitch + 40 * np.sin(2 * np.pi * 0.7 * t)) / rate
    voice = sum(np.sin(k * phase) / k for k in range(1, 8)) * np.clip(np.sin(2 * np.pi * 4 * t), 0, None) ** 0.5
    data = np.stack([0.2 * voice, 0.15 * voice], axis=1).astype(np.float32)
    buffer = io.BytesIO()
    soundfile.write(buffer, data, rate, format="WAV", subtype="PCM_16")
    return buffer.getvalue()


def pick_kind(rng: random.Random) -> str:
    return rng.choices(list(MIX), weights=list(MIX.values()))[0]


async def closed_loop(traffic: Traffic, kinds: list[str], concurrency: int, seed: int) -> list[Outcome]:
    """Send requests of `kinds`, `concurrency` at a time; the i-th request's choices are seeded by (seed, i), so a
    round sent again is the same round."""
    slots = asyncio.Semaphore(concurrency)

    async def one(index: int, kind: str) -> Outcome:
        async with slots:
            return await traffic.send(kind, random.Random(f"{seed}:{index}"))

    return await asyncio.gather(*(one(index, kind) for index, kind in enumerate(kinds)))


async def _accepted(response: httpx.Response, outcome: Outcome) -> bool:
    """A 200, or the error named in `outcome` (`refusal`)."""
    outcome.error = await refusal(response)
    return outcome.error is None


async def refusal(response: httpx.Response) -> str | None:
    """None for a 200; else the error named by status and the envelope's code (`http_503:server_busy`)."""
    if response.status_code == 200:
        return None
    await response.aread()
    try:
        code = response.json()["error"]["code"]
    except (ValueError, KeyError, TypeError):
        code = None
    return f"http_{response.status_code}:{code}"


def _fresh_seed(rng: random.Random) -> int:
    return rng.randrange(1 << 31)


def _halves(text: str) -> tuple[str, str]:
    middle = text.find(" ", len(text) // 2)
    return (text, "") if middle < 0 else (text[:middle], text[middle:])
