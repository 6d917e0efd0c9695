"""The server as a Ray Serve application (ray_app.py) on a local Ray cluster: two CPU replicas of a tiny Base model
and a tiny transcriber behind Serve's proxy, the output cache in Redis and the voice library in one shared
directory. Real clients (the openai SDK, httpx, websockets) stream speech and transcriptions through the proxy; a
replica is killed mid-stream."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field

import httpx
import numpy as np
import openai
import pytest

pytest.importorskip("ray", reason="Ray Serve is not installed: pip install 'qwen3-tts-server[ray]'")

import ray  # noqa: E402
from ray import serve  # noqa: E402
from websockets.asyncio.client import connect  # noqa: E402

from in_process import make_app, run_in_app  # noqa: E402
from parity_cases import write_reference  # noqa: E402
from qwen3_tts_server.engine.model_manager import ModelManager  # noqa: E402
from qwen3_tts_server.errors import CheckpointError  # noqa: E402
from qwen3_tts_server.model.asr.loading import load_asr_checkpoint  # noqa: E402
from qwen3_tts_server.model.asr.transcriber import Transcriber, heard_wave  # noqa: E402
from qwen3_tts_server.ray_app import APP_NAME, build, raise_unless_ready  # noqa: E402
from qwen3_tts_server.testing.live_server import free_port  # noqa: E402
from qwen3_tts_server.testing.signals import voiced_glide  # noqa: E402
from redis_server import RedisServer  # noqa: E402
from test_recognition_service import wav_bytes  # noqa: E402

REPLICAS = 2
PCM_FRAME_BYTES = 1920 * 2  # 80 ms of 16-bit samples at 24 kHz
LONG_TEXT = "This sentence is long enough for the tiny model to take a good while over it, frame by frame. " * 2
TIMEOUT = 120


@dataclass
class Cluster:
    base: str
    voice_reference: bytes
    pids: dict[str, int] = field(default_factory=dict)  # replica name (X-Replica) -> process id

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.base, timeout=TIMEOUT)

    def replica_pids(self) -> dict[str, int]:
        """Each running replica's pid, from /health answers until every replica has answered."""
        pids: dict[str, int] = {}
        with self.client() as client:
            for _ in range(64):
                response = client.get("/health")
                pids[response.headers["x-replica"]] = response.json()["pid"]
                if len(pids) == REPLICAS:
                    return pids
        raise AssertionError(f"only {sorted(pids)} of {REPLICAS} replicas answered")

    def upload_voice(self, client: httpx.Client, name: str) -> httpx.Response:
        files = {"audio_sample": ("ref.wav", self.voice_reference, "audio/wav")}
        response = client.post("/v1/audio/voices", data={"name": name}, files=files)
        assert response.status_code == 200, response.text
        return response


@pytest.fixture(scope="module")
def cluster(checkpoint_dirs, both_families, tmp_path_factory) -> Iterator[Cluster]:
    """Two replicas (one CPU and one torch thread each) on a local Ray cluster of 2 CPUs; Serve's proxy on a free
    loopback port; Redis and the voice library shared. Stopped (Serve, Ray, Redis) when the module is done."""
    redis = RedisServer()
    redis.start()
    shared = tmp_path_factory.mktemp("shared-data")
    reference = write_reference(tmp_path_factory.mktemp("ref"), "ref_16k_mono.wav").read_bytes()
    with pytest.MonkeyPatch.context() as env:
        # Serve's router sends a request to the replica with the shortest queue among those that answer its probe
        # within 0.1 s: on a busy machine one replica can miss it again and again, and the router then sends
        # everything to the other (every delete of test_a_voice_uploaded_... went to the speaker, 8 times out of 8).
        env.setenv("RAY_SERVE_QUEUE_LENGTH_RESPONSE_DEADLINE_S", "1.0")
        ray.init(num_cpus=REPLICAS, include_dashboard=False, object_store_memory=80 << 20, log_to_driver=False)
    try:
        port = free_port()
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        settings = {
            "models": [str(checkpoint_dirs["base"]), str(both_families["asr"])],
            "data_dir": str(shared),
            "redis_url": redis.url,
            "preload_model": True,
            "log_format": "text",
        }
        options = {"num_replicas": REPLICAS, "num_gpus": 0, "num_cpus": 1, "settings": settings}
        serve.run(build(options), name=APP_NAME, route_prefix="/")
        yield Cluster(f"http://127.0.0.1:{port}", reference)
    finally:
        serve.shutdown()
        ray.shutdown()
        redis.stop()


@pytest.fixture(scope="module")
def voice(cluster) -> str:
    with cluster.client() as client:
        return cluster.upload_voice(client, "Narrator").json()["id"]


def assert_speech(pcm: bytes) -> None:
    assert len(pcm) >= 2 * PCM_FRAME_BYTES and len(pcm) % PCM_FRAME_BYTES == 0
    assert np.abs(np.frombuffer(pcm, np.int16)).max() > 0


def assert_streamed(arrivals: list[float], last_made: float) -> None:
    """The first part came while the rest was still being made: well before the last one (a proxy that buffered
    would hand them all over at once, at the end)."""
    assert len(arrivals) >= 3, arrivals
    assert arrivals[0] < 0.5 * last_made, (arrivals[0], last_made)


def test_openai_sdk_streams_through_the_proxy_and_both_replicas_serve(cluster, voice):
    client = openai.OpenAI(base_url=f"{cluster.base}/v1", api_key="unused", timeout=TIMEOUT)
    replicas = set()
    for seed in range(1, 17):
        started = time.monotonic()
        arrivals, parts = [], []
        with client.audio.speech.with_streaming_response.create(
            model="tts-1", voice=voice, input=LONG_TEXT, response_format="pcm", extra_body={"seed": seed}
        ) as response:
            replicas.add(response.headers["x-replica"])
            for part in response.iter_bytes():
                arrivals.append(time.monotonic() - started)
                parts.append(part)
        assert_speech(b"".join(parts))
        assert_streamed(arrivals, arrivals[-1])
        if len(replicas) == REPLICAS and seed >= 2:
            break
    assert len(replicas) == REPLICAS, f"every request went to {replicas}"


def test_sse_and_websocket_stream_through_the_proxy(cluster, voice):
    # Seeds no other test uses: a seed the SDK test spoke would be replayed from the shared output cache at once.
    started = time.monotonic()
    arrivals, events = [], []
    with cluster.client() as client:
        body = {"input": LONG_TEXT, "voice": voice, "response_format": "pcm", "stream_format": "sse", "seed": 9001}
        with client.stream("POST", "/v1/audio/speech", json=body) as response:
            assert response.status_code == 200 and response.headers["x-replica"]
            for line in response.iter_lines():
                if line.startswith("data: "):
                    events.append(json.loads(line[6:]))
                    arrivals.append(time.monotonic() - started)
    assert events[-1]["type"] == "speech.audio.done" and {e["type"] for e in events[:-1]} == {"speech.audio.delta"}
    assert_speech(b"".join(base64.b64decode(event["audio"]) for event in events[:-1]))
    assert_streamed(arrivals[:-1], arrivals[-1])

    async def speak_over_websocket() -> tuple[str, list[float], bytes, dict]:
        url = cluster.base.replace("http://", "ws://", 1) + "/v1/audio/speech/ws"
        async with connect(url) as ws:
            await ws.send(json.dumps({"type": "session.update", "voice": voice, "seed": 9002}))
            await ws.send(json.dumps({"type": "input_text", "text": LONG_TEXT}))
            begun, audio, times = time.monotonic(), [], []
            while True:
                message = await asyncio.wait_for(ws.recv(), TIMEOUT)
                if isinstance(message, bytes):
                    audio.append(message)
                    times.append(time.monotonic() - begun)
                elif (event := json.loads(message))["type"] in ("done", "error"):
                    return ws.response.headers["x-replica"], times, b"".join(audio), event

    replica, times, pcm, last = asyncio.run(speak_over_websocket())
    assert last["type"] == "done" and replica, last
    assert_speech(pcm)
    assert_streamed(times, times[-1])


def requests_until(client: httpx.Client, send, replica: str | None = None, avoid: str | None = None) -> httpx.Response:
    """`send(client, attempt)` for attempt 0, 1, ... until answered by `replica` (or by any replica but `avoid`):
    the proxy picks the replica, a test can only ask again."""
    for attempt in range(64):
        response = send(client, attempt)
        name = response.headers["x-replica"]
        if (replica is None or name == replica) and name != avoid:
            return response
    raise AssertionError(f"no answer from {replica or 'a replica but ' + str(avoid)}")


def speak_pcm(client: httpx.Client, voice_id: str, seed: int) -> httpx.Response:
    body = {"input": "Shared between replicas.", "voice": voice_id, "seed": seed}
    return client.post("/v1/audio/speech", json={**body, "response_format": "pcm", "stream": False})


@contextmanager
def held_busy(client: httpx.Client, voice_id: str, replica: str, seeds: int) -> Iterator[None]:
    """Holds a long stream open on `replica` (the streams that land elsewhere are closed once it has one). Serve's
    router sends a request to the replica with the shorter queue, so the next request goes to another replica."""
    with ExitStack() as held:
        with ExitStack() as strays:
            for attempt in range(8):
                with ExitStack() as opened:
                    body = {"input": LONG_TEXT, "voice": voice_id, "response_format": "pcm", "seed": seeds + attempt}
                    response = opened.enter_context(client.stream("POST", "/v1/audio/speech", json=body))
                    assert response.status_code == 200 and response.headers["x-cache"] == "miss"
                    landed = response.headers["x-replica"] == replica
                    (held if landed else strays).push(opened.pop_all())
                if landed:
                    break
            else:
                raise AssertionError(f"no stream landed on {replica}")
        yield


def listed_ids(response: httpx.Response) -> list[str]:
    return [entry["id"] for entry in response.json()["data"]]


def share_a_voice(cluster: Cluster, client: httpx.Client, name: str, seeds: int) -> tuple[str, str, int, str]:
    """Upload a voice; speak it through the other replica (a miss) and list it there; the same request through the
    uploader is a hit (the output cache is Redis); delete it while the speaker is busy, so that the proxy picks the
    other. Returns the voice, the replica that spoke it, the seed it spoke with and the replica that deleted it."""
    uploaded = cluster.upload_voice(client, name)
    voice_id, uploader = uploaded.json()["id"], uploaded.headers["x-replica"]
    spoken = requests_until(client, lambda c, n: speak_pcm(c, voice_id, seeds + n), avoid=uploader)
    speaker, seed = spoken.headers["x-replica"], json.loads(spoken.request.content)["seed"]
    assert spoken.status_code == 200 and spoken.headers["x-cache"] == "miss"
    assert_speech(spoken.content)
    assert voice_id in listed_ids(requests_until(client, lambda c, _: c.get("/v1/audio/voices"), replica=speaker))
    repeated = requests_until(client, lambda c, _: speak_pcm(c, voice_id, seed), replica=uploader)
    assert repeated.headers["x-cache"] == "hit" and repeated.content == spoken.content
    with held_busy(client, voice_id, speaker, seeds + 500):
        deleted = client.delete(f"/v1/audio/voices/{voice_id}")
    assert deleted.status_code == 200 and deleted.json()["deleted"]
    return voice_id, speaker, seed, deleted.headers["x-replica"]


def test_transcriptions_stream_through_the_proxy_from_the_replicas_transcribers(cluster, both_families):
    """The replicas host the transcriber beside the speech model: whole and streamed answers are the transcript
    the transcriber gives offline, the deltas arriving as SSE through Serve's proxy."""
    clip = wav_bytes(voiced_glide(0.8, pitch=140.0))
    (expected,) = Transcriber(load_asr_checkpoint(both_families["asr"])).transcribe(
        [heard_wave(clip, "clip")], ["English"]
    )
    client = openai.OpenAI(base_url=f"{cluster.base}/v1", api_key="unused", timeout=TIMEOUT)
    whole = client.audio.transcriptions.create(model="whisper-1", file=("clip.wav", clip), language="en")
    *deltas, done = client.audio.transcriptions.create(
        model="gpt-4o-transcribe", file=("clip.wav", clip), language="en", stream=True
    )
    assert whole.text == expected.text and whole.usage.seconds == 1
    assert deltas and all(event.type == "transcript.text.delta" for event in deltas)
    assert done.type == "transcript.text.done" and done.text == expected.text


def test_a_voice_uploaded_on_one_replica_is_spoken_by_another_and_deleted_from_a_third(cluster):
    with cluster.client() as client:
        for attempt in range(8):
            voice_id, speaker, seed, deleter = share_a_voice(cluster, client, f"Shared {attempt}", 1000 * attempt)
            if deleter != speaker:
                break  # deleted through another replica than the one whose prompt cache holds the voice
        else:
            pytest.fail("every delete went to the replica that spoke the voice")
        # The speaker's prompt cache still holds the clone prompt; the voice is gone all the same.
        gone = requests_until(client, lambda c, _: speak_pcm(c, voice_id, seed + 1), replica=speaker)
        assert gone.status_code == 400 and gone.json()["error"]["param"] == "voice"
        relisted = requests_until(client, lambda c, _: c.get("/v1/audio/voices"), replica=speaker)
        assert voice_id not in listed_ids(relisted)
        fetched = requests_until(client, lambda c, _: c.get(f"/v1/audio/voices/{voice_id}"), replica=speaker)
        assert fetched.status_code == 404


def test_health_check_raises_with_the_ready_reason():
    def missing_checkpoint():
        raise CheckpointError("no checkpoint at /nowhere")

    broken = ModelManager(missing_checkpoint, describe=missing_checkpoint)
    with pytest.raises(RuntimeError, match="not ready: .*no checkpoint at /nowhere"):
        app = make_app(broken)
        run_in_app(app, lambda *_: raise_unless_ready(app))


@dataclass
class Stream:
    seed: int
    replica: str | None = None
    arrivals: list[float] = field(default_factory=list)
    size: int = 0
    error: str | None = None
    done: bool = False


async def read_stream(client: httpx.AsyncClient, voice: str, stream: Stream) -> None:
    body = {"input": LONG_TEXT, "voice": voice, "response_format": "pcm", "seed": stream.seed}
    try:
        async with client.stream("POST", "/v1/audio/speech", json=body) as response:
            stream.replica = response.headers["x-replica"]
            async for part in response.aiter_raw():
                stream.arrivals.append(time.monotonic())
                stream.size += len(part)
        stream.done = True
    except httpx.HTTPError as exc:
        stream.error = type(exc).__name__


def test_a_replica_killed_mid_stream_is_replaced_and_the_other_streams_go_on(cluster, voice):
    pids = cluster.replica_pids()

    async def scenario() -> tuple[list[Stream], str, float, list[httpx.Response]]:
        async with httpx.AsyncClient(base_url=cluster.base, timeout=TIMEOUT) as client:
            streams: list[Stream] = []
            tasks = []
            # Streams until both replicas hold one that has sent audio.
            while len({s.replica for s in streams if s.arrivals}) < REPLICAS and len(streams) < 8:
                stream = Stream(seed=100 + len(streams))
                streams.append(stream)
                tasks.append(asyncio.create_task(read_stream(client, voice, stream)))
                while not stream.arrivals and not stream.done and stream.error is None:
                    await asyncio.sleep(0.01)
            victim = streams[0].replica
            assert victim is not None
            killed_at = time.monotonic()
            os.kill(pids[victim], signal.SIGKILL)
            # Requests sent after the kill: nothing was sent to the dead replica yet, so they are served.
            after = await asyncio.gather(
                *(
                    client.post("/v1/audio/speech", json={"input": "After.", "voice": voice, "seed": seed})
                    for seed in (200, 201, 202)
                )
            )
            await asyncio.wait_for(asyncio.gather(*tasks), TIMEOUT)
            return streams, victim, killed_at, after

    streams, victim, killed_at, after = asyncio.run(scenario())
    cut = [s for s in streams if s.replica == victim]
    survivors = [s for s in streams if s.replica != victim]
    assert cut and survivors
    for stream in cut:  # a clean, detectable end: the chunked body is cut, never passed off as complete
        assert not stream.done and stream.error == "RemoteProtocolError", stream
    for stream in survivors:
        assert stream.done and stream.error is None and stream.size % PCM_FRAME_BYTES == 0, stream
    assert any(s.arrivals[-1] > killed_at for s in survivors), "no survivor was still streaming at the kill"
    assert all(response.status_code == 200 for response in after), [r.text for r in after]
    assert {response.headers["x-replica"] for response in after} != {victim}

    # Serve starts a replacement: two replicas again, a new process in place of the killed one.
    deadline = time.monotonic() + 90
    while True:
        try:
            replaced = cluster.replica_pids()
        except (AssertionError, httpx.HTTPError):
            replaced = {}
        if len(replaced) == REPLICAS and victim not in replaced:
            break
        assert time.monotonic() < deadline, f"no replacement for {victim}: {replaced}"
        time.sleep(1)
    assert pids[victim] not in replaced.values()
