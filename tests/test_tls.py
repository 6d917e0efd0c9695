"""The earlier server's operational settings: HTTPS with SSL_KEYFILE and SSL_CERTFILE on `serve` and on the
gateway (its worker stays plain HTTP behind it), the health probe over HTTPS, one TLS file alone refused,
TIMEOUT_KEEP_ALIVE (65 s) given to uvicorn, and the earlier server's ignored variables named in a warning at
start."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
import soundfile as sf
import uvicorn

from qwen3_tts_server.config import Settings
from qwen3_tts_server.errors import ConfigurationError
from qwen3_tts_server.gateway.app import GatewayApp
from qwen3_tts_server.gateway.listen import uvicorn_options
from qwen3_tts_server.gateway.main import uvicorn_config
from qwen3_tts_server.gateway.settings import GatewaySettings
from qwen3_tts_server.gateway.worker import Worker
from qwen3_tts_server.testing.live_server import LiveProcess, TLSFiles, live_process

SPEECH = "/v1/audio/speech"
BODY = {"model": "tts-1", "voice": "alloy", "input": "Hello there.", "response_format": "wav", "stream": False}
IGNORED = {"VAD_TRIM": "true", "WARMUP_TEXTS": "Hello"}  # the earlier server's, not honoured
TIMEOUT = 300


@pytest.fixture(scope="module")
def tls(tmp_path_factory) -> TLSFiles:
    """A self-signed certificate for 127.0.0.1 and localhost, made with the openssl command."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("the openssl command makes the test certificate")
    directory = tmp_path_factory.mktemp("tls")
    files = TLSFiles(directory / "key.pem", directory / "cert.pem")
    command = [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    command += ["-keyout", str(files.keyfile), "-out", str(files.certfile), "-days", "1", "-subj", "/CN=localhost"]
    command += ["-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"]
    subprocess.run(command, check=True, capture_output=True, timeout=60)
    return files


def log_records(live: LiveProcess) -> list[dict]:
    return [json.loads(line) for line in live.log_tail(200_000).splitlines() if line.startswith("{")]


def warnings_logged(live: LiveProcess) -> str:
    return "\n".join(record["msg"] for record in log_records(live) if record["level"] == "WARNING")


def assert_ignored_variables_named(warnings: str) -> None:
    for name in IGNORED:
        assert f"{name} is set but ignored" in warnings, warnings
    assert "not trimmed" in warnings  # why VAD_TRIM does nothing


def assert_speaks(client: httpx.Client) -> None:
    response = client.post(SPEECH, json=BODY)
    assert response.status_code == 200, response.text
    audio, rate = sf.read(io.BytesIO(response.content))
    assert rate == 24000 and len(audio) > 0 and abs(audio).max() > 0


@pytest.mark.parametrize("alone", ["SSL_KEYFILE", "SSL_CERTFILE"])
def test_one_tls_file_alone_is_refused_naming_both(clean_env, tls, alone):
    clean_env.setenv(alone, str(tls.keyfile if alone == "SSL_KEYFILE" else tls.certfile))
    with pytest.raises(ConfigurationError, match=f"SSL_KEYFILE and SSL_CERTFILE go together.*{alone} is set alone"):
        Settings.load()


def test_the_gateway_refuses_one_tls_file_alone(tls, tmp_path):
    command = [sys.executable, "-m", "qwen3_tts_server", "gateway", "--ssl-certfile", str(tls.certfile)]
    env = {name: value for name, value in os.environ.items() if name not in ("SSL_KEYFILE", "SSL_CERTFILE")}
    result = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT)
    assert result.returncode == 2
    assert "SSL_KEYFILE and SSL_CERTFILE go together" in result.stderr


def test_a_missing_tls_file_is_named(clean_env, tls):
    clean_env.setenv("SSL_KEYFILE", str(tls.keyfile.with_name("absent.pem")))
    clean_env.setenv("SSL_CERTFILE", str(tls.certfile))
    with pytest.raises(ConfigurationError, match="SSL_KEYFILE=.*no such file"):
        Settings.load()


def uvicorn_configs(settings: Settings) -> dict[str, uvicorn.Config]:
    """The uvicorn configs `serve` and the gateway build from these settings (the gateway's through its own
    settings, which it reads from `config --json`: the same values)."""
    gateway_settings = GatewaySettings.from_effective(settings.effective())
    gateway_app = GatewayApp(gateway_settings, Worker(gateway_settings, []))
    return {
        "serve": uvicorn.Config(app=object(), **uvicorn_options(settings)),
        "gateway": uvicorn_config(gateway_settings, gateway_app),
    }


def test_keep_alive_is_65_s_by_default_on_serve_and_the_gateway(clean_env):
    for name, config in uvicorn_configs(Settings.load()).items():
        assert config.timeout_keep_alive == 65, name
        assert not config.is_ssl, name
    clean_env.setenv("TIMEOUT_KEEP_ALIVE", "90")
    for name, config in uvicorn_configs(Settings.load()).items():
        assert config.timeout_keep_alive == 90, name


def test_the_tls_files_reach_uvicorn_on_serve_and_the_gateway(clean_env, tls):
    clean_env.setenv("SSL_KEYFILE", str(tls.keyfile))
    clean_env.setenv("SSL_CERTFILE", str(tls.certfile))
    for name, config in uvicorn_configs(Settings.load()).items():
        assert config.is_ssl, name
        assert (Path(config.ssl_keyfile), Path(config.ssl_certfile)) == (tls.keyfile, tls.certfile), name


def healthcheck(live: LiveProcess, tls: TLSFiles) -> subprocess.CompletedProcess:
    """`qwen3-tts-server healthcheck` as a container runs it: the server's environment, its port as a flag."""
    port = str(urlsplit(live.base).port)
    env = {**os.environ, "SSL_KEYFILE": str(tls.keyfile), "SSL_CERTFILE": str(tls.certfile)}
    command = [sys.executable, "-m", "qwen3_tts_server", "healthcheck", "--port", port]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)


def test_serve_over_https(checkpoint_dirs, tls):
    model = checkpoint_dirs["custom_voice"]
    with live_process("serve", model, "--preload-model", tls=tls, env=IGNORED) as live:
        assert live.base.startswith("https://")
        with live.client(timeout=TIMEOUT) as client:
            assert client.get("/health").json()["status"] == "ok"
            assert_speaks(client)
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            httpx.get(live.base + "/health", timeout=30)  # real TLS: a client that trusts no such CA refuses it
        probe = healthcheck(live, tls)
        assert_ignored_variables_named(warnings_logged(live))
    assert probe.returncode == 0, probe.stdout + probe.stderr
    assert probe.stdout.startswith("https://127.0.0.1:") and "ready" in probe.stdout


def test_gateway_over_https_proxies_to_a_plain_http_worker(checkpoint_dirs, tls):
    with live_process("gateway", checkpoint_dirs["custom_voice"], tls=tls, env=IGNORED) as gateway:
        assert gateway.health()["gateway"]["worker"] == "stopped"
        assert_ignored_variables_named(warnings_logged(gateway))  # by the gateway: no worker yet
        with gateway.client(timeout=TIMEOUT) as client:
            assert_speaks(client)
        worker_port = next(entry["port"] for entry in log_records(gateway) if entry["msg"] == "worker starting")
        assert httpx.get(f"http://127.0.0.1:{worker_port}/ready", timeout=30).status_code == 200
