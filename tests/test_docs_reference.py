"""The documentation's reference pages (tools/docs/reference.py) name everything the code has: every setting with
its variable and flag, every command, every HTTP route, every metric with its labels."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from fastapi.routing import APIRoute

sys.path.insert(0, str(Path(__file__).parents[1] / "tools" / "docs"))
import reference  # noqa: E402

from qwen3_tts_server.cli import build_parser  # noqa: E402
from qwen3_tts_server.config import SETTING_GROUPS, Settings, env_name  # noqa: E402


@pytest.fixture(scope="module")
def app():
    with reference.served_app() as app:
        yield app


def test_every_setting_has_its_row():
    page = reference.settings_page()
    for name in Settings.model_fields:
        assert f"| `{env_name(name)}`" in page and f"`--{name.replace('_', '-')}`" in page, name
    assert "`ASR_USE_SERVER_VAD`" in page  # an alias the earlier server used, beside its setting


def test_every_setting_is_listed_once_under_its_groups_heading():
    page = reference.settings_page()
    sections = dict(section.split("\n", 1) for section in page.split("\n## ")[1:])
    assert list(sections) == [group.title for group in SETTING_GROUPS]
    assert sorted(name for group in SETTING_GROUPS for name in group.model_fields) == sorted(Settings.model_fields)
    for group in SETTING_GROUPS:
        assert group.model_fields, group.title
        for name in group.model_fields:
            row = f"| `{env_name(name)}`"
            assert page.count(row) == 1 and row in sections[group.title], (group.title, name)


def test_every_command_has_its_help():
    page = reference.cli_page()
    commands = next(action for action in build_parser()._actions if hasattr(action, "choices") and action.choices)
    for name in commands.choices:
        assert f"## `{name}`" in page and f"usage: qwen3-tts-server {name}" in page, name


def test_every_route_and_metric_is_listed(app):
    routes = reference.http_page(app)
    for route in app.routes:
        if isinstance(route, APIRoute) and route.include_in_schema:
            for method in route.methods:
                assert f"## `{method} {route.path}`" in routes, (method, route.path)
    assert '"input": "Hello there."' in routes  # a request body's examples, from its schema
    assert '    "id": "tts-1",' in routes  # what /v1/models answered while the page was written
    metrics = reference.metrics_page(app)
    assert "| `qwen3_tts_requests` | counter | `format`, `model`, `route`, `status` |" in metrics
    for family in app.state.services.metrics.registry.collect():
        assert f"| `{family.name}` |" in metrics


def test_every_module_is_on_the_layout_page_with_what_it_owns():
    page = reference.layout_page()
    root = Path(reference.qwen3_tts_server.__file__).parent
    for module in root.rglob("*.py"):
        if module.name != "__init__.py":
            assert reference.summary(module), f"{module.relative_to(root)} has no docstring"
            assert f"| `{module.name}` | {reference.cell(reference.summary(module))} |" in page


def test_every_protocol_message_is_listed():
    page = reference.protocols_page()
    for protocol in reference.protocols():
        assert f"## {protocol.title}" in page
        for message in protocol.messages:
            assert f"| `{reference.cell(message.name)}` | {reference.cell(message.fields)} |" in page, message.name
