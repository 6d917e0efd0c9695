"""POST /v1/audio/translations on a live server: transcribed by the hosted Qwen3-ASR (tiny random weights), then
translated by an OpenAI-compatible chat model, here a stand-in chat API in this process that records what it is
sent and answers with a marked copy; without a translation model configured, a 501 that says what to set."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from qwen3_tts_server.testing.live_server import live_process
from test_transcription_api import ENV, clip, offline, sdk, transcriber  # noqa: F401 (fixtures)


class ChatAPI(BaseHTTPRequestHandler):
    received: list[dict] = []
    status = 200

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        ChatAPI.received.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
        text = body["messages"][-1]["content"]
        answer = {"choices": [{"message": {"role": "assistant", "content": f" [{body['model']}] {text} \n"}}]}
        data = json.dumps(answer if ChatAPI.status == 200 else {"error": "down"}).encode()
        self.send_response(ChatAPI.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def chat_api() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), ChatAPI)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/v1"
    server.shutdown()


@pytest.fixture(scope="module")
def server(both_families, chat_api):
    env = ENV | {"TRANSLATE_BASE_URL": chat_api, "TRANSLATE_MODEL": "qwen3:8b", "OPENAI_API_KEY": "sk-chat"}
    with live_process("serve", both_families["speech"], "--model", str(both_families["asr"]), env=env) as live:
        yield live


def test_the_transcript_is_translated_by_the_chat_model(server, transcriber, clip):  # noqa: F811
    expected = offline(transcriber, clip).text
    ChatAPI.received.clear()
    translated = sdk(server).audio.translations.create(model="whisper-1", file=("clip.wav", clip))
    (sent,) = ChatAPI.received
    assert translated.text == f"[qwen3:8b] {expected}"
    assert sent["path"] == "/v1/chat/completions" and sent["auth"] == "Bearer sk-chat"
    system, user = sent["body"]["messages"]
    assert "into English" in system["content"] and user == {"role": "user", "content": expected}
    assert sent["body"]["model"] == "qwen3:8b" and sent["body"]["temperature"] == 0.0


def test_the_earlier_servers_target_language_and_the_other_formats(server, transcriber, clip):  # noqa: F811
    expected = offline(transcriber, clip).text
    ChatAPI.received.clear()
    with server.client(timeout=300) as http:
        upload = {"file": ("clip.wav", clip, "audio/wav")}
        chinese = http.post("/v1/audio/translations", data={"language": "zh"}, files=upload)
        text = http.post("/v1/audio/translations", data={"response_format": "text"}, files=upload)
        verbose = http.post("/v1/audio/translations", data={"response_format": "verbose_json"}, files=upload)
        srt = http.post("/v1/audio/translations", data={"response_format": "srt"}, files=upload)
    assert chinese.json() == {
        "text": f"[qwen3:8b] {expected}",
        "language": "zh",
        "usage": {"type": "duration", "seconds": 2},
    }
    assert "into Chinese" in ChatAPI.received[0]["body"]["messages"][0]["content"]
    assert text.text == f"[qwen3:8b] {expected}\n"
    assert verbose.json()["task"] == "translate" and verbose.json()["language"] == "english"
    assert srt.status_code == 400 and srt.json()["error"]["param"] == "response_format"


def test_a_failing_chat_model_is_a_502(server, clip):  # noqa: F811
    ChatAPI.status = 500
    try:
        with server.client(timeout=300) as http:
            answer = http.post("/v1/audio/translations", files={"file": ("clip.wav", clip)})
    finally:
        ChatAPI.status = 200
    error = answer.json()["error"]
    assert answer.status_code == 502 and "the translation model answered 500" in error["message"]


def test_without_a_translation_model_the_route_says_what_to_set(both_families, clip):  # noqa: F811
    asr = ("--model", str(both_families["asr"]))
    with (
        live_process("serve", both_families["speech"], *asr, env=ENV) as live,
        live.client(timeout=300) as http,
    ):
        answer = http.post("/v1/audio/translations", files={"file": ("clip.wav", clip)})
    assert answer.status_code == 501 and "TRANSLATE_BASE_URL" in answer.json()["error"]["message"]
