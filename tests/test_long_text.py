"""Long input through the text front end and the engine: spoken in full, segment by segment, in one stream;
the language and the spoken text reported; budget cuts reported, never hidden."""

from __future__ import annotations

import asyncio
import base64
import json
from urllib.parse import unquote

import numpy as np
import pytest

from in_process import make_app, run_in_app
from qwen3_tts_server.api.speech.schemas import SpeechRequest
from qwen3_tts_server.engine.model_manager import ModelManager
from qwen3_tts_server.engine.registry import ModelRegistry
from qwen3_tts_server.engine.synthesis import Engine
from qwen3_tts_server.service.speech.cloning import VoiceCloner
from qwen3_tts_server.service.speech.synthesis import SpeechService
from qwen3_tts_server.service.speech.voice_library import PromptCache, VoiceLibrary
from qwen3_tts_server.service.speech.voices import VoiceService

SENTENCES = [
    "The museum opens at 9:30 on weekdays and the tickets cost $12 for adults.",
    "Children under 12 enter for free, and groups of 10 or more get a discount of 15%.",
    "The east wing holds paintings from the 17th century, most of them landscapes and portraits.",
    "Guided tours leave every hour from the main hall, next to the shop and the cafe.",
    "Please keep your voice down in the reading room, where students work on their essays.",
    "Photography is allowed everywhere except in the special exhibition on the second floor.",
]
LONG_TEXT = " ".join(SENTENCES * 2)  # about 1000 characters: several segments
FRAME_CAP = 6  # frames per segment, so a long text stays quick with a random model


@pytest.fixture(scope="module")
def long_speech(models, tmp_path_factory):
    """Chunks of the long text as (segment, chunk), the prepared stream, and the most engine rows it held."""
    model = models["custom_voice"]
    manager = ModelManager.fixed(model)
    registry = ModelRegistry.single("tiny", manager)
    registry.attach_engines(lambda manager: Engine(manager, max_batch_size=4, max_frames_cap=FRAME_CAP))
    engine = registry.default.engine.start()
    cache = PromptCache(4)
    library = VoiceLibrary(tmp_path_factory.mktemp("data"), cache)
    service = SpeechService(registry, VoiceService(registry, library, VoiceCloner(cache)))
    body = SpeechRequest(input=LONG_TEXT, voice="vivian", response_format="pcm", seed=3)

    async def scenario():
        speech = await service.speak(body.synthesis())
        chunks, rows = [], []
        async for index, chunk in speech.chunks():
            chunks.append((index, chunk))
            rows.append(engine.active + engine.waiting)
        return speech, chunks, rows

    try:
        speech, chunks, rows = asyncio.run(scenario())
    finally:
        engine.stop()
    return speech, chunks, rows


def test_every_segment_is_spoken_in_order_and_nothing_is_lost(long_speech):
    speech, chunks, _ = long_speech
    segments = speech.segments
    assert len(segments) >= 3 and all(len(segment.source) <= 300 for segment in segments)
    assert " ".join(segment.source for segment in segments).split() == LONG_TEXT.split()
    assert {segment.language for segment in segments} == {"english"}
    assert "twelve dollars" in segments[0].text and "$" not in " ".join(segment.text for segment in segments)
    for index in range(len(segments)):
        mine = [chunk for i, chunk in chunks if i == index]
        assert mine, f"segment {index} produced no audio"
        assert [chunk.first_frame for chunk in mine] == list(np.cumsum([0] + [c.frames for c in mine[:-1]]))
        assert [chunk.finish_reason is not None for chunk in mine] == [False] * (len(mine) - 1) + [True]
        assert sum(chunk.frames for chunk in mine) >= 2


def test_budget_cuts_are_reported_exactly(long_speech):
    speech, chunks, _ = long_speech
    cut = [index for index, chunk in chunks if chunk.finish_reason == "length"]
    assert speech.cut_segments == cut and cut, "a random model runs into the small cap on some segments"
    assert speech.result_headers()["X-Segments-Cut"] == ",".join(map(str, cut))


def test_the_next_segment_is_generated_while_one_plays_and_never_more(long_speech):
    _, _, rows = long_speech
    assert max(rows) == 2, "segment N+1 runs beside N, and no further segment is queued"


def test_segments_meet_without_a_click(long_speech):
    speech, chunks, _ = long_speech
    audio = np.concatenate([chunk.audio for _, chunk in chunks])
    frames = [sum(chunk.frames for i, chunk in chunks if i == index) for index in range(len(speech.segments))]
    seams = np.cumsum(frames)[:-1] * 1920
    assert len(seams) >= 2
    for seam in seams:
        assert audio[seam - 1] == 0 and audio[seam] == 0  # the fades reach silence where segments meet
        assert np.abs(audio[seam - 240 : seam + 240]).max() > 0  # and only for a moment


def test_api_reports_language_segments_and_the_spoken_text(models, tmp_path):
    app = make_app(models["custom_voice"], model_id="tiny", data_dir=tmp_path, max_request_frames=FRAME_CAP)
    mixed = "Good morning, everyone, and welcome. 今天的会议在三楼举行，请准时到达。"

    async def scenario(_, http):
        base = {"voice": "vivian", "response_format": "pcm", "stream": False, "include_text": True, "seed": 1}
        normalized = await http.post("/v1/audio/speech", json={**base, "input": LONG_TEXT})
        verbatim = await http.post("/v1/audio/speech", json={**base, "input": "It is $12.", "normalize": False})
        languages = await http.post("/v1/audio/speech", json={**base, "input": mixed})
        sse = await http.post("/v1/audio/speech", json={**base, "input": "It is $12.", "stream_format": "sse"})
        plain = await http.post("/v1/audio/speech", json={"voice": "vivian", "input": "Hi there, friend."})
        return normalized, verbatim, languages, sse, plain

    normalized, verbatim, languages, sse, plain = run_in_app(app, scenario)
    segments = int(normalized.headers["x-segments"])
    spoken = unquote(normalized.headers["x-spoken-text"]).split("\n")
    assert segments >= 3 and len(spoken) == segments and "twelve dollars" in spoken[0]
    assert normalized.headers["x-language"] == "english"
    assert len(normalized.content) % 3840 == 0 and len(normalized.content) >= segments * 2 * 3840
    assert unquote(verbatim.headers["x-spoken-text"]) == "It is $12."
    assert languages.headers["x-language"] == "english,chinese" and languages.headers["x-segments"] == "2"
    events = [json.loads(line[6:]) for line in sse.text.splitlines() if line.startswith("data: ")]
    # Too short to tell its language: the model gets Auto, and the text is still read in (English) words.
    assert events[0] == {"type": "speech.text", "segments": [{"text": "It is twelve dollars.", "language": "auto"}]}
    assert events[1]["type"] == "speech.audio.delta" and base64.b64decode(events[1]["audio"])
    assert "x-spoken-text" not in plain.headers and plain.headers["x-language"] == "english"


def test_the_spoken_text_is_logged_at_debug_level(models, tmp_path, caplog):
    app = make_app(models["custom_voice"], model_id="tiny", data_dir=tmp_path, max_request_frames=2)

    async def scenario(_, http):
        body = {"voice": "vivian", "input": "The ticket costs $12 today.", "stream": False, "response_format": "pcm"}
        return await http.post("/v1/audio/speech", json=body)

    with caplog.at_level("DEBUG", logger="qwen3_tts_server.service.speech.synthesis"):
        assert run_in_app(app, scenario).status_code == 200
    assert "[('english', 'The ticket costs twelve dollars today.')]" in caplog.text
