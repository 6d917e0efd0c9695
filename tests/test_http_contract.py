"""The HTTP contract shared by the server and the gateway: the API key check and OpenAI's error object."""

from __future__ import annotations

import subprocess
import sys

import pytest

from qwen3_tts_server.http_contract import UNAUTHORIZED_CODE, UNAUTHORIZED_MESSAGE, error_object, key_accepted

KEY = "s3cret"


@pytest.mark.parametrize(
    ("authorization", "query_key"),
    [(f"Bearer {KEY}", None), (None, KEY), ("Bearer wrong", KEY), (f"Bearer {KEY}", "wrong"), (f"Token {KEY}", None)],
)
def test_key_accepted_from_the_header_or_the_query(authorization, query_key):
    assert key_accepted([KEY], authorization, query_key)


@pytest.mark.parametrize(
    ("authorization", "query_key"),
    [
        (None, None),
        ("", ""),
        ("Bearer wrong", None),
        (None, "wrong"),
        (f"Bearer {KEY}x", None),
        ("Bearer ", None),
        ("Token wrong", None),
        (f"Basic {KEY}", None),
    ],
)
def test_wrong_or_missing_key_refused(authorization, query_key):
    assert not key_accepted([KEY], authorization, query_key)


@pytest.mark.parametrize("accepted_keys", [[], [""]])
def test_no_key_configured_lets_everyone_in(accepted_keys):
    assert key_accepted(accepted_keys, None)
    assert key_accepted(accepted_keys, "Bearer anything", "anything")


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, "invalid_request_error"),
        (401, "authentication_error"),
        (404, "invalid_request_error"),
        (413, "invalid_request_error"),
        (500, "server_error"),
        (502, "server_error"),
        (503, "server_error"),
    ],
)
def test_error_object_typed_by_status(status, kind):
    assert error_object(status, "boom", "some_code", "voice") == {
        "message": "boom",
        "type": kind,
        "param": "voice",
        "code": "some_code",
    }


def test_error_object_always_has_all_four_keys():
    assert error_object(401, UNAUTHORIZED_MESSAGE, UNAUTHORIZED_CODE) == {
        "message": UNAUTHORIZED_MESSAGE,
        "type": "authentication_error",
        "param": None,
        "code": "invalid_api_key",
    }
    assert error_object(500, "x") == {"message": "x", "type": "server_error", "param": None, "code": None}


def test_imports_only_the_standard_library():  # the gateway imports it
    code = (
        "import sys, qwen3_tts_server.http_contract; "
        "heavy = {'torch', 'numpy', 'fastapi', 'pydantic', 'starlette', 'httpx'} & set(sys.modules); "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
