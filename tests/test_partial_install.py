"""A server without PyAV and lingua, as the GPU check runs one (tools/gpu_kit.sh: their wheels outweigh what a
device call carries): it starts, warns that it cannot detect languages, streams raw PCM for a request that names
its language, and answers a request that leaves the language to it with an error envelope."""

from __future__ import annotations

import httpx

from qwen3_tts_server.testing.live_server import live_process

# The CLI with PyAV and lingua unimportable (a None in sys.modules makes `import av` raise ModuleNotFoundError).
WITHOUT_PYAV_AND_LINGUA = (
    "-c",
    "import runpy, sys; sys.modules['av'] = sys.modules['lingua'] = None; "
    "runpy.run_module('qwen3_tts_server', run_name='__main__')",
)
BODY = {"model": "tts-1", "input": "Hello there, a short test.", "voice": "vivian", "response_format": "pcm", "seed": 3}


def test_a_server_without_pyav_and_lingua_streams_raw_pcm(checkpoint_dirs):
    env = {"MAX_REQUEST_FRAMES": "6"}
    model = checkpoint_dirs["custom_voice"]
    with live_process("serve", model, "--preload-model", env=env, launcher=WITHOUT_PYAV_AND_LINGUA) as live:
        with httpx.Client(base_url=live.base, timeout=120) as client:
            named = client.post("/v1/audio/speech", json={**BODY, "stream": True, "language": "English"})
            detected = client.post("/v1/audio/speech", json={**BODY, "stream": True})
        log = live.log_tail(20000)
    assert named.status_code == 200 and named.headers["content-type"].startswith("audio/pcm")
    assert len(named.content) == 6 * 1920 * 2, "six frames of 16-bit samples"
    assert detected.status_code == 500 and detected.json()["error"]["code"] == "internal_error"
    assert "no language detection" in log
