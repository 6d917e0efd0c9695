"""schemathesis over the published OpenAPI schema: whatever a client sends, the server answers without a 5xx.

The app is built when the module is collected (schemathesis's fixture-based loader does not run under this
pytest), on its own tiny checkpoint and data directory."""

from __future__ import annotations

import tempfile
from pathlib import Path

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from in_process import make_app
from parity_cases import CHECKPOINTS
from qwen3_tts_server.model.tts_model import Qwen3TTSModel
from qwen3_tts_server.testing.random_checkpoint import make_test_model

_scratch = Path(tempfile.mkdtemp(prefix="schema-fuzz-"))
_model = Qwen3TTSModel.load(make_test_model(_scratch / "model", **CHECKPOINTS["custom_voice"]))
# Four frames at most per request keeps a 4096-character input from taking minutes on a CPU.
_app = make_app(_model, model_id="tiny", data_dir=_scratch / "data", max_batch_size=4, max_request_frames=4)
schema = schemathesis.openapi.from_asgi("/openapi.json", _app)


@schema.parametrize()
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_input_gives_a_server_error(case):
    case.call_and_validate(checks=[not_a_server_error])
