"""The documentation's reference pages, written from the code as it stands: every setting from `Settings`, by
group, every command from the CLI's parser, every HTTP route from the app's OpenAPI schema, every Prometheus metric
from its registry. `mkdocs build` writes them (tools/docs/hooks.py); nothing here is copied by hand."""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from pydantic.fields import FieldInfo

import qwen3_tts_server
from qwen3_tts_server.cli import build_parser
from qwen3_tts_server.config import FLAG_ALIASES, SETTING_GROUPS, Settings, env_name
from qwen3_tts_server.protocols import WireProtocol

GENERATED = "<!-- Written by tools/docs at build time from the code: edit the code, not this page. -->\n\n"


def cell(text: object) -> str:
    """Text for one Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def settings_page() -> str:
    """Every setting, by group (the groups `Settings` is composed of): its variable, its flag, its default and
    what it does."""
    lines = [
        "# Settings\n",
        GENERATED,
        "Every setting is read from the environment (the variable's name), from `./.env`, or from the flag of "
        "`qwen3-tts-server serve` (and of the commands that take it); a flag wins over the environment. A bad value "
        "stops the start and names the variable.\n",
    ]
    for group in SETTING_GROUPS:
        lines += [f"## {group.title}\n", inspect.getdoc(group) or "", ""]
        lines += ["| variable | flag | default | what it does |", "|---|---|---|---|"]
        lines += [_setting_row(name, info) for name, info in group.model_fields.items()]
        lines.append("")
    return "\n".join(lines)


def _setting_row(name: str, info: FieldInfo) -> str:
    names = [env_name(name)]
    alias = info.validation_alias
    if alias is not None and hasattr(alias, "choices"):
        names += [env_name(str(choice)) for choice in alias.choices if str(choice) != name]
    flags = ["--" + name.replace("_", "-"), *FLAG_ALIASES.get(name, [])]
    default = info.get_default(call_default_factory=True)
    shown = "none" if default is None else json.dumps(default) if isinstance(default, list) else default
    variables = "<br>".join(f"`{variable}`" for variable in names)
    return (
        f"| {variables} | {', '.join(f'`{flag}`' for flag in flags)} | `{cell(shown)}` | "
        f"{cell(info.description or '')} |"
    )


def _commands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:  # argparse keeps its subcommands here only
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


def cli_page() -> str:
    """Every command of `qwen3-tts-server`, with its help as the parser prints it."""
    os.environ["COLUMNS"] = "100"  # the help's width, whatever terminal builds the site
    parser = build_parser()
    lines = ["# Command line\n", GENERATED, parser.description or "", ""]
    if parser.epilog:
        lines += [parser.epilog, ""]
    for name, command in _commands(parser):
        lines += [f"## `{name}`\n", "```text", command.format_help().rstrip(), "```", ""]
    return "\n".join(lines)


@contextmanager
def served_app() -> Iterator[FastAPI]:
    """The server's app over tiny random-weight models of every kind, as `serve` builds it (no model loaded)."""
    from qwen3_tts_server.api.app import create_app
    from qwen3_tts_server.server import prepare_model
    from qwen3_tts_server.testing.random_asr_checkpoint import make_asr_test_model
    from qwen3_tts_server.testing.random_checkpoint import make_test_model

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        models = [
            make_test_model(root / "speech", size="tiny", model_type="custom_voice"),
            make_asr_test_model(root / "asr", size="tiny", model_type="asr"),
        ]
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        settings = Settings.load(models=",".join(str(path) for path in models), data_dir=str(root / "data"))
        yield create_app(settings, prepare_model(settings).registry)


def _schema_name(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1]
    if schema.get("type") == "array":
        return f"array of {_schema_name(schema.get('items', {}))}"
    if "anyOf" in schema:
        return " or ".join(_schema_name(option) for option in schema["anyOf"])
    return str(schema.get("type", "object"))


def _examples(content: dict[str, Any], schemas: dict[str, Any]) -> list[Any]:
    """A request body's examples: its media type's own, else its schema's (`examples` of the model)."""
    found = []
    for media in content.values():
        if "example" in media:
            found.append(media["example"])
        found += [example.get("value") for example in media.get("examples", {}).values()]
        reference = media.get("schema", {}).get("$ref", "")
        found += schemas.get(reference.rsplit("/", 1)[-1], {}).get("examples", []) if reference else []
    return found


def answered(app: FastAPI, paths: list[str]) -> dict[str, Any]:
    """What the app answers to a GET of each of `paths` (routes without parameters), read from it: the examples of
    the routes that list and report. Models stay unloaded: these routes read their configs only."""
    from starlette.testclient import TestClient

    with TestClient(app) as client:
        return {path: client.get(path).json() for path in paths}


def http_page(app: FastAPI) -> str:
    """Every route of the app: its method and path, summary, parameters, request body with its examples, answers,
    and for the routes that list and report, what this server answered over tiny test models."""
    schema = app.openapi()
    schemas = schema.get("components", {}).get("schemas", {})
    plain_gets = [path for path, operations in schema["paths"].items() if "get" in operations and "{" not in path]
    real = answered(app, plain_gets)
    lines = [
        "# HTTP routes\n",
        GENERATED,
        "Every route the server answers, from its OpenAPI schema (also served at `/openapi.json`). Errors use "
        'OpenAI\'s envelope, `{"error": {"message", "type", "param", "code"}}` (the `default` answer). '
        "The answers shown were given by this server over tiny random-weight test models while this page was "
        "built. WebSocket routes: [Streaming protocols](protocols.md).\n",
    ]
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            lines.append(f"## `{method.upper()} {path}`\n")
            summary = operation.get("summary", "")
            description = operation.get("description", "")
            lines += [text for text in (summary, description) if text] + [""]
            parameters = operation.get("parameters", [])
            if parameters:
                lines += ["| parameter | in | type | required | description |", "|---|---|---|---|---|"]
                for parameter in parameters:
                    lines.append(
                        f"| `{parameter['name']}` | {parameter['in']} | {cell(_schema_name(parameter['schema']))} | "
                        f"{'yes' if parameter.get('required') else 'no'} | {cell(parameter.get('description', ''))} |"
                    )
                lines.append("")
            body = operation.get("requestBody")
            if body:
                kinds = ", ".join(
                    f"`{media}` ({_schema_name(spec.get('schema', {}))})" for media, spec in body["content"].items()
                )
                lines.append(f"Request body: {kinds}.\n")
                for example in _examples(body["content"], schemas):
                    lines += ["```json", json.dumps(example, indent=2, ensure_ascii=False), "```", ""]
            answers = operation.get("responses", {})
            if answers:
                lines += ["| status | answer |", "|---|---|"]
                for status, answer in answers.items():
                    media = ", ".join(f"`{kind}`" for kind in answer.get("content", {}))
                    lines.append(f"| {status} | {cell(answer.get('description', ''))} {media} |")
                lines.append("")
            if method == "get" and path in real:
                shown = json.dumps(real[path], indent=2, ensure_ascii=False)
                lines += ["??? example \"What it answered\"", "    ```json", *(f"    {line}" for line in
                          shown.splitlines()), "    ```", ""]  # fmt: skip
    if schemas:
        lines += ["## Schemas\n"]
        for name, model in schemas.items():
            lines.append(f"### {name}\n")
            if model.get("description"):
                lines += [cell(model["description"]), ""]
            fields = model.get("properties", {})
            if fields:
                required = set(model.get("required", []))
                lines += ["| field | type | required | default | description |", "|---|---|---|---|---|"]
                for field, spec in fields.items():
                    default = json.dumps(spec["default"]) if "default" in spec else ""
                    lines.append(
                        f"| `{field}` | {cell(_schema_name(spec))} | {'yes' if field in required else 'no'} | "
                        f"{cell(default)} | {cell(spec.get('description', ''))} |"
                    )
                lines.append("")
    return "\n".join(lines)


def metrics_page(app: FastAPI) -> str:
    """Every metric `/metrics` exposes: its name, type, labels and help."""
    registry = app.state.services.metrics.registry
    declared = {  # a labelled metric has no samples before its first observation: its labels as declared
        family.name: tuple(getattr(collector, "_labelnames", ()))
        for collector in list(registry._collector_to_names)  # prometheus_client keeps its collectors here only
        if hasattr(collector, "describe")
        for family in collector.describe()
    }
    lines = [
        "# Metrics\n",
        GENERATED,
        "`GET /metrics` exposes these in Prometheus' text format (a counter's samples end in `_total`, a "
        "histogram's in `_bucket`, `_sum` and `_count`).\n",
        "| metric | type | labels | what it counts |",
        "|---|---|---|---|",
    ]
    for family in sorted(registry.collect(), key=lambda family: family.name):
        sampled = {label for sample in family.samples for label in sample.labels if label != "le"}
        labels = sorted(sampled | set(declared.get(family.name, ())))
        lines.append(
            f"| `{family.name}` | {family.type} | {', '.join(f'`{label}`' for label in labels)} | "
            f"{cell(family.documentation)} |"
        )
    return "\n".join(lines) + "\n"


def summary(module: Path) -> str:
    """A module's docstring's first sentence: what it owns."""
    docstring = ast.get_docstring(ast.parse(module.read_text(encoding="utf-8"))) or ""
    paragraph = " ".join(docstring.split("\n\n")[0].split())
    found = re.search(r"^(.+?\.)(\s|$)", paragraph)
    return found.group(1) if found else paragraph


def layout_page() -> str:
    """Every package and module of the server, with what its docstring says it owns."""
    root = Path(qwen3_tts_server.__file__).parent
    lines = [
        "# Layout\n",
        GENERATED,
        "Every module of `src/qwen3_tts_server/`, by package, with the first sentence of its docstring (what it "
        "owns). What may import what: [Architecture](architecture.md#what-may-import-what).\n",
    ]
    for package in sorted({path.parent for path in root.rglob("*.py")}):
        name = package.relative_to(root.parent).as_posix() + "/"
        lines.append(f"## `{name}`\n")
        opening = summary(package / "__init__.py") if (package / "__init__.py").exists() else ""
        if opening:
            lines += [opening, ""]
        lines += ["| module | what it owns |", "|---|---|"]
        for module in sorted(package.glob("*.py")):
            if module.name != "__init__.py":
                lines.append(f"| `{module.name}` | {cell(summary(module))} |")
        lines.append("")
    return "\n".join(lines)


def protocols() -> tuple[WireProtocol, ...]:
    """Every streaming protocol the server speaks, as its module declares it."""
    from qwen3_tts_server.api.recognition.live import LIVE_TRANSCRIBE
    from qwen3_tts_server.service.recognition.cartesia import CARTESIA_STT_SOCKET, CARTESIA_TURNS_SOCKET
    from qwen3_tts_server.service.recognition.deepgram import DEEPGRAM_LISTEN_SOCKET
    from qwen3_tts_server.service.recognition.realtime import REALTIME_TRANSCRIPTION
    from qwen3_tts_server.service.speech.cartesia import CARTESIA_TTS_SOCKET
    from qwen3_tts_server.service.speech.deepgram import DEEPGRAM_SPEAK_SOCKET
    from qwen3_tts_server.service.speech.elevenlabs import ELEVENLABS_SOCKET
    from qwen3_tts_server.service.speech.realtime import SPEECH_SOCKET
    from qwen3_tts_server.wyoming_server.handler import WYOMING

    return (
        SPEECH_SOCKET,
        ELEVENLABS_SOCKET,
        DEEPGRAM_SPEAK_SOCKET,
        CARTESIA_TTS_SOCKET,
        REALTIME_TRANSCRIPTION,
        LIVE_TRANSCRIBE,
        DEEPGRAM_LISTEN_SOCKET,
        CARTESIA_STT_SOCKET,
        CARTESIA_TURNS_SOCKET,
        WYOMING,
    )


def protocols_page() -> str:
    """Every streaming protocol's messages, as each protocol's module declares them."""
    lines = [
        "# Streaming protocols\n",
        GENERATED,
        "The messages of every protocol the server speaks beyond plain HTTP, as the code that speaks each declares "
        "them (its tests check that what the server sends is declared). How to use them: the guides.\n",
    ]
    for protocol in protocols():
        lines += [f"## {protocol.title}\n", f"`{protocol.endpoint}`\n", protocol.summary, ""]
        for sender, heading in (("client", "The client sends"), ("server", "The server sends")):
            lines += [f"### {heading}\n", "| message | carries | what it does |", "|---|---|---|"]
            for message in protocol.messages:
                if message.sender == sender:
                    lines.append(f"| `{cell(message.name)}` | {cell(message.fields)} | {cell(message.meaning)} |")
            lines.append("")
    return "\n".join(lines)
