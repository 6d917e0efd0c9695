"""Seeded speech is the same alone and beside other requests: through the HTTP path, with a request of two segments
whose second pauses (backpressure: the client has not reached it) and resumes, among requests of other seeds. Each
row's frame step and codec decode give it the same bits in any batch (model/cpu_linear.py, codec_stream.py), in
float32 and in the CPU default, w8a8 (model/quantization.py)."""

from __future__ import annotations

import asyncio

import pytest

from in_process import make_app, run_in_app
from qwen3_tts_server.config import Settings
from qwen3_tts_server.model.device import cpu_multiplies_bfloat16
from qwen3_tts_server.model.tts.tts_model import Qwen3TTSModel

# Two segments (each sentence near SEGMENT_MAX_CHARS), each cut at MAX_REQUEST_FRAMES.
TEXT = (
    "Hello there, this is the first sentence of a request long enough to be spoken in two segments, with a few "
    "more words to bring it close to the limit of one. And here is the second sentence, which the engine starts "
    "while the first is still being made, and which waits for its client once it has run far enough ahead."
)
BODY = {"model": "tiny", "voice": "vivian", "input": TEXT, "response_format": "pcm", "seed": 7}
OTHERS = [
    {**BODY, "seed": 11, "voice": "ryan"},
    {**BODY, "seed": 12, "input": "A different text, said in one segment."},
    {**BODY, "seed": 13, "input": "One sentence alone, said by another voice.", "voice": "serena"},
]


@pytest.fixture(scope="module")
def default_cpu_model(checkpoint_dirs) -> Qwen3TTSModel:
    """The tiny model in the precision QUANTIZE and DTYPE auto give it on this CPU (w8a8, bfloat16 activations where
    the CPU multiplies bfloat16)."""
    precision = Settings.load(quantize="auto", dtype="auto").precision("cpu", cpu_multiplies_bfloat16())
    return Qwen3TTSModel.load(checkpoint_dirs["custom_voice"], dtype=precision.dtype, quantize=precision.quantize)


@pytest.mark.parametrize("precision", ["float32", "the CPU default"])
def test_seeded_speech_is_the_same_alone_and_beside_other_requests(models, request, precision):
    model = models["custom_voice"] if precision == "float32" else request.getfixturevalue("default_cpu_model")
    # A second segment pauses after 5 frames ahead of its client.
    app = make_app(model, stream_buffer_seconds=0.4, max_request_frames=30)

    async def scenario(_, http):
        solo = await http.post("/v1/audio/speech", json=BODY)
        engine = app.state.services.registry.default.engine
        paused: list[int] = []

        async def watch() -> None:
            while True:
                paused.append(len(engine.generator.paused) if engine.generator is not None else 0)
                await asyncio.sleep(0.005)

        watcher = asyncio.create_task(watch())
        requests = [BODY] * 5 + OTHERS
        together = await asyncio.gather(*(http.post("/v1/audio/speech", json=body) for body in requests))
        watcher.cancel()
        return solo, together[:5], max(paused)

    solo, together, most_paused = run_in_app(app, scenario)
    assert solo.status_code == 200 and solo.headers["x-segments"] == "2"
    assert most_paused > 0, "some second segment paused and resumed"
    for response in together:
        assert response.status_code == 200
        assert response.content == solo.content, "seeded speech changed beside other requests"
