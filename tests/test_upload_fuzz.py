"""Hostile uploads to the recognition routes (the OpenAPI fuzzer covers the JSON routes): containers that lie about
their length or rate, odd rates, samples that are no numbers, fields far over any sensible size. Every answer is a
transcript or a 4xx OpenAI envelope with a code, never a 500 or a dropped connection, and the server's peak memory
stays within a bound (a few KB that decode to hours once grew it by gigabytes)."""

from __future__ import annotations

import asyncio
import io
import struct
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest
import soundfile as sf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audio_files import encode_with_pyav
from qwen3_tts_server.api.limits import MULTIPART_OVERHEAD
from qwen3_tts_server.config import MAX_TRANSCRIPTION_BYTES
from qwen3_tts_server.service.recognition.transcription import MAX_CONTEXT_TOKENS
from qwen3_tts_server.testing.live_server import LiveProcess, live_process
from qwen3_tts_server.testing.signals import voiced_glide

MAX_SECONDS = 60  # the server's MAX_TRANSCRIPTION_SECONDS here: each case below lies far past it
ENV = {"MAX_TRANSCRIPTION_SECONDS": str(MAX_SECONDS), "MAX_TRANSCRIPTION_TOKENS": "8", "IDLE_TIMEOUT": "0"}
PEAK_GROWTH = 300 << 20  # bytes the server's peak RSS may grow by over every case (decoding a lie grew it by GBs)
ROUTES = ("/v1/audio/transcriptions", "/v1/audio/transcriptions/stream", "/v1/audio/subtitles")


def wav(samples: np.ndarray, rate: int, subtype: str = "PCM_16") -> bytes:
    buffer = io.BytesIO()
    sf.write(buffer, samples, rate, format="WAV", subtype=subtype)
    return buffer.getvalue()


def silent_flac(seconds: float, rate: int) -> bytes:
    """FLAC of silence: a few bytes a second, however long it lasts."""
    return encode_with_pyav(np.zeros((int(seconds * rate), 1), np.float32), rate, "flac", "flac")


def with_rate(data: bytes, rate: int) -> bytes:
    """A WAV whose header says `rate` (and the byte rate that goes with it) for the same samples."""
    block = struct.unpack_from("<H", data, 32)[0]
    return data[:24] + struct.pack("<II", rate, rate * block) + data[32:]


CLIP = wav(voiced_glide(1.0, 16000, pitch=140.0), 16000)
FLAC = encode_with_pyav(voiced_glide(1.0, 16000, pitch=140.0)[:, None], 16000, "flac", "flac")
NOT_NUMBERS = np.full(16000, 0.1, np.float32)
NOT_NUMBERS[::100] = np.nan


NOT_AUDIO = {400, 415}  # bytes no decoder opens: 415 or, as OpenAI answers them, 400


def hostile_cases() -> dict[str, tuple[bytes, dict[str, str], set[int]]]:
    """name: (the file, the other form fields, the statuses it may get)."""
    return {
        "FLAC of 2 h at 2 kHz": (silent_flac(2 * 3600, 2000), {}, {400}),
        "1 Hz WAV": (with_rate(wav(np.zeros(8000, np.float32), 8000), 1), {}, {400}),
        "a second of samples at 4 Hz": (with_rate(CLIP, 4), {}, {400}),
        "NaN samples": (wav(NOT_NUMBERS, 16000, "FLOAT"), {}, {400}),
        "infinite samples": (wav(np.full(16000, np.inf, np.float32), 16000, "FLOAT"), {}, {400}),
        "a rate of 0": (with_rate(CLIP, 0), {}, NOT_AUDIO),
        "a WAV cut in its header": (CLIP[:30], {}, NOT_AUDIO),
        "100 KB language": (CLIP, {"language": "x" * 100_000}, {400}),
        "100 KB prompt": (CLIP, {"prompt": "Qwen " * 20_000}, {400}),
        "a prompt past the token bound": (CLIP, {"prompt": "名" * (2 * MAX_CONTEXT_TOKENS)}, {400}),
        "the audio placeholder in the prompt": (CLIP, {"prompt": "<|audio_pad|>"}, {400}),
        "100 KB response_format": (CLIP, {"response_format": "j" * 100_000}, {400}),
        "NaN temperature": (CLIP, {"temperature": "nan"}, {400}),
    }


@pytest.fixture(scope="module")
def server(both_families) -> LiveProcess:
    with live_process("serve", both_families["asr"], env=ENV) as live:
        yield live


def peak_rss(live: LiveProcess) -> int:
    status = Path(f"/proc/{live.process.pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))) << 10


def assert_answered(answer: httpx.Response, allowed: set[int] | None = None) -> None:
    """A transcript, or a 4xx envelope naming its failure in a code, in a message of sensible size."""
    if answer.status_code == 200 and (allowed is None or 200 in allowed):
        return
    assert 400 <= answer.status_code < 500 and (allowed is None or answer.status_code in allowed), answer.text[:500]
    error = answer.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["code"], error
    assert error["type"] == "invalid_request_error" and len(error["message"]) < 2000, error["message"][:500]


@pytest.fixture(scope="module")
def baseline(server) -> int:
    """The peak RSS once the model is loaded and has transcribed a clip."""
    with server.client(timeout=120) as http:
        assert http.post(ROUTES[0], files={"file": ("clip.wav", CLIP)}).status_code == 200
    return peak_rss(server)


def test_hostile_uploads_get_a_clear_4xx_and_cost_no_memory(server, baseline):
    with server.client(timeout=120) as http:
        for name, (data, fields, status) in hostile_cases().items():
            answer = http.post(ROUTES[0], data=fields, files={"file": ("upload", data)})
            assert answer.status_code in status, (name, answer.text[:300])
            assert_answered(answer)
            if "prompt" in fields:
                assert answer.json()["error"]["param"] == "prompt", name
    assert peak_rss(server) - baseline < PEAK_GROWTH


def test_a_recording_past_the_duration_limit_is_refused_naming_it(server):
    with server.client(timeout=120) as http:
        for route in ROUTES:
            fields = {"mode": "fast"} if route.endswith("subtitles") else {}
            answer = http.post(route, data=fields, files={"file": ("long.flac", silent_flac(MAX_SECONDS + 5, 8000))})
            assert answer.status_code == 400, (route, answer.text)
            error = answer.json()["error"]
            assert (error["code"], error["param"]) == ("audio_too_long", "file")
            assert (
                f"lasts more than {MAX_SECONDS} s; this server transcribes at most {MAX_SECONDS} s" in error["message"]
            )


def test_async_clients_read_the_413_of_a_recording_over_the_limit(server):
    """A body past the transcription routes' limit (25 MiB and the form's 64 KiB) is refused on its Content-Length;
    clients that write it whole before they read the answer still read the 413."""
    recording = b"\0" * (MAX_TRANSCRIPTION_BYTES + MULTIPART_OVERHEAD + 1)

    async def scenario() -> tuple[httpx.Response, openai.APIStatusError]:
        async with httpx.AsyncClient(base_url=server.base, timeout=120) as client:
            raw = await client.post(ROUTES[0], files={"file": ("big.wav", recording)})
        sdk = openai.AsyncOpenAI(api_key="unused", base_url=server.base + "/v1", max_retries=0, timeout=120)
        with pytest.raises(openai.APIStatusError) as refused:
            await sdk.audio.transcriptions.create(model="whisper-1", file=("big.wav", recording))
        return raw, refused.value

    raw, refused = asyncio.run(scenario())
    assert raw.status_code == 413 and raw.json()["error"]["code"] == "payload_too_large"
    assert refused.status_code == 413 and refused.code == "payload_too_large"


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    container=st.sampled_from(["wav", "flac"]),
    changes=st.lists(st.tuples(st.integers(0, 63), st.integers(0, 255)), min_size=1, max_size=6),
)
def test_uploads_with_mangled_headers_get_a_transcript_or_a_clear_4xx(server, baseline, container, changes):
    """A valid short clip with bytes of its header overwritten (sizes, rates, channels, formats, sample counts)."""
    data = bytearray(CLIP if container == "wav" else FLAC)
    for position, value in changes:
        data[position] = value
    with server.client(timeout=120) as http:
        assert_answered(http.post(ROUTES[0], files={"file": ("upload", bytes(data))}))
    assert peak_rss(server) - baseline < PEAK_GROWTH
