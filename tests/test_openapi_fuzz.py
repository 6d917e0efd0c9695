"""schemathesis over the published OpenAPI schema: whatever a client sends, the server answers without a 5xx,
and a response whose status and media type the schema documents has a body that its schema accepts.

The app is built when the test runs, not when the module is collected: a module fixture (schemathesis's
`from_fixture` loader) on the session's tiny custom-voice model, with a data directory from pytest's
`tmp_path_factory`."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error, response_schema_conformance

from in_process import make_app

pytestmark = pytest.mark.slow

# Generated cases per operation, on top of schemathesis's fixed example and coverage phases: the whole file takes
# about 2.5 minutes on a 2-core CPU, most of it in the three speech routes' valid inputs.
EXAMPLES = 1000


@pytest.fixture(scope="module")
def openapi_schema(models, tmp_path_factory):
    # One frame per request: the server still prepares, generates, encodes and answers each valid input as it would a
    # long one, and a 4096-character input takes no longer than a short one (four frames made the file take 15
    # minutes, the three speech routes' valid inputs a tenth of a second each).
    app = make_app(
        models["custom_voice"],
        model_id="tiny",
        data_dir=tmp_path_factory.mktemp("openapi-fuzz-data"),
        max_batch_size=4,
        max_request_frames=1,
    )
    return schemathesis.openapi.from_asgi("/openapi.json", app)


@pytest.fixture(autouse=True)
def _node_id_for_schemathesis(request):
    # schemathesis 4.32's lazy loader reads and rewrites `node._nodeid`, which pytest 9.2 renamed (`_id`); give
    # it the attribute it reads. Its per-operation reports are subtests labelled by operation, so nothing else
    # depends on the rewrite. Harmless once either side changes.
    if not hasattr(request.node, "_nodeid"):
        request.node._nodeid = request.node.nodeid


schema = schemathesis.pytest.from_fixture("openapi_schema")


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_operation_answers_any_input_without_a_server_error(case):
    case.call_and_validate(checks=[not_a_server_error, response_schema_conformance])
