"""API keys and CORS: several keys accepted at once (API_KEY and API_KEYS, for rotation), each compared in constant
time, over HTTP and the WebSocket, in the app and through the gateway; CORS off unless CORS_ORIGINS names origins,
and then preflights answered without a key and the API's own headers readable by the page."""

from __future__ import annotations

import asyncio
import hmac
import importlib.util
import io
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import soundfile as sf
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from in_process import make_app, run_in_app
from qwen3_tts_server import http_contract
from qwen3_tts_server.config import Settings
from qwen3_tts_server.gateway.app import GatewayApp
from qwen3_tts_server.gateway.settings import GatewaySettings
from qwen3_tts_server.gateway.worker import Worker
from qwen3_tts_server.http_contract import key_accepted
from qwen3_tts_server.testing.live_gateway import LiveGateway, live_gateway

OLD_KEY, NEW_KEY = "old-key", "new-key"
ALLOWED, OTHER = "https://app.example", "https://evil.example"
ORIGIN = {"Origin": ALLOWED}
SPEECH = "/v1/audio/speech"
TIMEOUT = 300


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def preflight(origin: str, method: str = "POST") -> dict[str, str]:
    """What a browser sends before a cross-origin POST with a key: no key itself."""
    return {
        "Origin": origin,
        "Access-Control-Request-Method": method,
        "Access-Control-Request-Headers": "authorization, content-type",
    }


def speech_body() -> dict:
    return {"model": "tts-1", "voice": "alloy", "input": "Hi.", "response_format": "wav", "stream": False, "seed": 1}


def assert_unauthorized(response: httpx.Response) -> None:
    assert response.status_code == 401
    assert response.json()["error"] == {
        "message": http_contract.UNAUTHORIZED_MESSAGE,
        "type": "authentication_error",
        "param": None,
        "code": "invalid_api_key",
    }


def assert_readable_speech(response: httpx.Response) -> None:
    """A WAV a page on ALLOWED may read, with every X- header the API set exposed to it."""
    assert response.status_code == 200, response.text
    samples, rate = sf.read(io.BytesIO(response.content))
    assert rate == 24000 and len(samples) > 0
    assert response.headers.get_list("access-control-allow-origin") == [ALLOWED]
    exposed = {name.strip().lower() for name in response.headers["access-control-expose-headers"].split(",")}
    custom = {name for name in response.headers if name.startswith("x-")}
    assert {"x-request-id", "x-language", "x-audio-frames", "x-latency-total-ms"} <= custom <= exposed


# --- the key check ----------------------------------------------------------------------------------------------


def test_any_of_the_keys_is_accepted_from_the_header_or_the_query():
    keys = [OLD_KEY, NEW_KEY]
    assert key_accepted(keys, f"Bearer {OLD_KEY}") and key_accepted(keys, f"Bearer {NEW_KEY}")
    assert key_accepted(keys, None, NEW_KEY) and key_accepted(keys, "Bearer wrong", OLD_KEY)
    for authorization, query_key in [(None, None), ("Bearer wrong", "wrong"), (f"Bearer {OLD_KEY}x", None)]:
        assert not key_accepted(keys, authorization, query_key)
    assert key_accepted([], None) and key_accepted([""], "Bearer anything")  # no key configured
    assert not key_accepted(["", NEW_KEY], None)  # an empty key opens nothing
    with pytest.raises(TypeError):  # a lone key is not a list of its characters
        key_accepted(NEW_KEY, "Bearer n")


def test_every_key_is_compared_even_after_a_match(monkeypatch):
    compared = []
    compare_digest = hmac.compare_digest

    def counting(given: bytes, expected: bytes) -> bool:
        compared.append(expected)
        return compare_digest(given, expected)

    monkeypatch.setattr(http_contract.hmac, "compare_digest", counting)
    keys = ["first", "second", "third"]
    assert key_accepted(keys, "Bearer first", None)
    assert compared == [b"first", b"first", b"second", b"second", b"third", b"third"]  # the header and the query


# --- the app in process -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def secured_app(models, tmp_path_factory):
    return make_app(
        models["custom_voice"],
        api_key=OLD_KEY,
        api_keys=[NEW_KEY],
        cors_origins=[ALLOWED],
        data_dir=tmp_path_factory.mktemp("voices"),
    )


def test_both_keys_work_over_http_and_a_wrong_one_is_refused(secured_app):
    async def scenario(client, http):
        answers = [await http.get("/v1/models", headers=bearer(key)) for key in (OLD_KEY, NEW_KEY, "wrong")]
        answers.append(await http.get("/v1/models"))
        speech = await client.audio.speech.create(model="tts-1", voice="alloy", input="Hi.", response_format="wav")
        return answers, speech

    (old, new, wrong, missing), speech = run_in_app(secured_app, scenario, api_key=NEW_KEY)
    assert old.status_code == new.status_code == 200 and old.json() == new.json()
    assert_unauthorized(wrong)
    assert_unauthorized(missing)
    assert len(sf.read(io.BytesIO(speech.content))[0]) > 0


def test_both_keys_work_over_the_websocket_and_a_wrong_one_is_refused(secured_app):
    with TestClient(secured_app) as client:
        for headers, query in [(bearer(OLD_KEY), ""), ({}, f"?api_key={NEW_KEY}"), (bearer(NEW_KEY), "")]:
            with client.websocket_connect("/v1/audio/speech/ws" + query, headers=headers) as ws:
                ws.send_json({"type": "session.update", "voice": "alloy"})
                assert ws.receive_json()["type"] == "session.updated"
        for headers, query in [(bearer("wrong"), ""), ({}, "?api_key=wrong"), ({}, "")]:
            with (
                client.websocket_connect("/v1/audio/speech/ws" + query, headers=headers) as ws,
                pytest.raises(WebSocketDisconnect) as closed,
            ):
                ws.receive_json()
            assert closed.value.code == 1008


def test_cors_for_an_allowed_origin(secured_app):
    async def scenario(_, http):
        allowed = await http.options(SPEECH, headers=preflight(ALLOWED))
        other = await http.options(SPEECH, headers=preflight(OTHER))
        refused = await http.post(SPEECH, json=speech_body(), headers=ORIGIN)
        speech = await http.post(SPEECH, json=speech_body(), headers={**ORIGIN, **bearer(NEW_KEY)})
        foreign = await http.get("/v1/models", headers={"Origin": OTHER, **bearer(NEW_KEY)})
        return allowed, other, refused, speech, foreign

    allowed, other, refused, speech, foreign = run_in_app(secured_app, scenario)
    assert allowed.status_code == 200  # without a key
    assert allowed.headers["access-control-allow-origin"] == ALLOWED
    assert "POST" in allowed.headers["access-control-allow-methods"]
    assert {"authorization", "content-type"} <= set(allowed.headers["access-control-allow-headers"].lower().split(", "))
    assert other.status_code == 400 and "access-control-allow-origin" not in other.headers
    assert_unauthorized(refused)  # the page can read why
    assert refused.headers["access-control-allow-origin"] == ALLOWED
    assert_readable_speech(speech)
    assert foreign.status_code == 200 and "access-control-allow-origin" not in foreign.headers


def test_cors_is_off_by_default(models, tmp_path):
    app = make_app(models["custom_voice"], data_dir=tmp_path)

    async def scenario(_, http):
        return await http.options(SPEECH, headers=preflight(ALLOWED)), await http.get("/health", headers=ORIGIN)

    for response in run_in_app(app, scenario):
        assert not [name for name in response.headers if name.startswith("access-control-")], response.headers


# --- the gateway ------------------------------------------------------------------------------------------------


def test_gateway_cors_is_off_by_default(clean_env):
    clean_env.setenv("API_KEY", OLD_KEY)
    settings = GatewaySettings.from_effective(Settings.load().effective())
    app = GatewayApp(settings, Worker(settings, []))

    async def scenario():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
            return [await http.options(SPEECH, headers=preflight(ALLOWED)), await http.get("/health", headers=ORIGIN)]

    refused, health = asyncio.run(scenario())
    assert_unauthorized(refused)  # no preflight answered: a browser stops here
    assert health.status_code == 200
    for response in (refused, health):
        assert not [name for name in response.headers if name.startswith("access-control-")], response.headers


@pytest.fixture(scope="module")
def secured_gateway(checkpoint_dirs) -> Iterator[LiveGateway]:
    env = {"API_KEY": OLD_KEY, "API_KEYS": NEW_KEY, "CORS_ORIGINS": f"{ALLOWED},https://other.example"}
    with live_gateway(checkpoint_dirs["custom_voice"], env=env) as running:
        yield running


def test_gateway_answers_preflights_and_refusals_itself_and_proxies_the_rest(secured_gateway):
    with secured_gateway.client(timeout=TIMEOUT) as http:
        allowed = http.options(SPEECH, headers=preflight(ALLOWED))
        other = http.options(SPEECH, headers=preflight(OTHER))
        wrong = http.post(SPEECH, json=speech_body(), headers={**ORIGIN, **bearer("wrong")})
        health = http.get("/health", headers=ORIGIN)
        assert health.json()["gateway"]["starts"] == 0  # none of these started the worker
        old = http.post(SPEECH, json=speech_body(), headers={**ORIGIN, **bearer(OLD_KEY)})
        new = http.post(SPEECH, json=speech_body(), headers={**ORIGIN, **bearer(NEW_KEY)})
    assert allowed.status_code == 200 and allowed.headers["access-control-allow-origin"] == ALLOWED
    assert "POST" in allowed.headers["access-control-allow-methods"]
    assert {"authorization", "content-type"} <= set(allowed.headers["access-control-allow-headers"].lower().split(", "))
    assert other.status_code == 400 and "access-control-allow-origin" not in other.headers
    assert_unauthorized(wrong)
    assert wrong.headers["access-control-allow-origin"] == health.headers["access-control-allow-origin"] == ALLOWED
    assert_readable_speech(old)  # the worker's headers, once: the gateway adds none to a proxied answer
    assert_readable_speech(new)


def audit_with(monkeypatch, stdout: str) -> int:
    """tools/audit_lock.py's verdict on pip-audit output `stdout` (pip-audit itself is not run)."""
    spec = importlib.util.spec_from_file_location("audit_lock", Path(__file__).parents[1] / "tools" / "audit_lock.py")
    audit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(audit)
    monkeypatch.setattr(audit.subprocess, "run", lambda *_, **__: subprocess.CompletedProcess([], 1, stdout, "boom"))
    return audit.main()


def test_the_lock_audit_fails_on_a_fixable_vulnerability_only(monkeypatch, capsys):
    def report(*vulns: list[str], skipped: bool = False) -> str:
        pins = [{"name": "pkg", "version": "1.0", "vulns": [{"id": "GHSA-x", "fix_versions": fix} for fix in vulns]}]
        if skipped:
            pins.append({"name": "other", "skip_reason": "Dependency not found on PyPI"})
        return json.dumps({"dependencies": pins, "fixes": []})

    assert audit_with(monkeypatch, report(["1.1"])) == 1
    assert "pkg==1.0: GHSA-x (fixed in 1.1)" in capsys.readouterr().out
    assert audit_with(monkeypatch, report([])) == 0, "no release fixes it yet: listed, not failed"
    assert "(fixed in no release yet)" in capsys.readouterr().out
    assert audit_with(monkeypatch, report(skipped=True)) == 0
    assert "1 of 2 pins checked" in (out := capsys.readouterr().out) and "could be fetched for 1 pins: other" in out
    assert audit_with(monkeypatch, "") == 1, "pip-audit that did not finish fails"
