"""What Deepgram's speech and listening protocols share: its error message, its request ids, and the model
description its messages carry (`service/speech/deepgram.py`, `service/recognition/deepgram.py`)."""

from __future__ import annotations

import uuid
from typing import Any


def request_id() -> str:
    return str(uuid.uuid4())


def model_uuid(model: str) -> str:
    """A stable id for a model name, where Deepgram gives its model's uuid."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, model))


def error_message(error: dict[str, Any]) -> dict[str, Any]:
    """Deepgram's error message for our error object (`error_body`)."""
    return {"type": "Error", "err_code": error["code"], "err_msg": error["message"], "description": error["message"]}
