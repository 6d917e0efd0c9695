"""Every failure as OpenAI's envelope, {"error": {"message", "type", "param", "code"}}, with the earlier server's flat
keys beside it (`code`, `message`, `statusCode`, `context`: http_contract.error_document)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException

from ..errors import (
    EngineBusyError,
    ModelWaitError,
    TTSError,
    UnprocessableValueError,
    error_response_body,
    invalid_value,
)
from ..http_contract import error_document
from .context import request_context
from .schemas import ErrorDocument


def _errors(kind: type[TTSError] = TTSError) -> list[type[TTSError]]:
    return [kind, *(error for sub in kind.__subclasses__() for error in _errors(sub))]


def failures() -> dict[int | str, dict]:
    """Every route's failures for its OpenAPI schema, as one `default` answer: the error envelope, and each status
    with the codes it comes with (read from the error classes, so a new one is documented by itself)."""
    codes: dict[int, set[str]] = {}
    for error in _errors():
        codes.setdefault(error.status, set()).add(error.code)
    statuses = "; ".join(f"{status}: {', '.join(sorted(codes[status]))}" for status in sorted(codes))
    text = f"A failure, as OpenAI's error envelope; its status and `error.code` say what failed ({statuses})"
    return {"default": {"model": ErrorDocument, "description": text}}


def envelope(status: int, message: str, code: str | None = None, param: str | None = None) -> JSONResponse:
    return JSONResponse(error_document(status, message, code, param), status_code=status)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(TTSError)
    async def tts_error(request: Request, exc: TTSError) -> JSONResponse:
        request_context(request).error_type = exc.code  # for the request log and the errors metric
        response = JSONResponse(error_response_body(exc), status_code=exc.status)
        if isinstance(exc, EngineBusyError | ModelWaitError):
            response.headers["Retry-After"] = str(exc.retry_after)
        return response

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        return await tts_error(request, invalid_value(exc.errors()))

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        """What the framework itself refuses (no such route, a method it does not take): the status's name as the
        code (`not_found`, `method_not_allowed`), as every other error has one."""
        code = HTTPStatus(exc.status_code).name.lower()
        request_context(request).error_type = code
        response = envelope(exc.status_code, str(exc.detail), code)
        response.headers.update(exc.headers or {})
        return response


class EarlierServerRoute(APIRoute):
    """A route only the earlier ASR server had: a request its schema refuses (a missing `file`, ...) is a 422 as
    FastAPI answered it there, in the error envelope."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def answer(request: Request) -> Response:
            try:
                return await handler(request)
            except RequestValidationError as exc:
                raise invalid_value(exc.errors(), UnprocessableValueError) from None

        return answer
