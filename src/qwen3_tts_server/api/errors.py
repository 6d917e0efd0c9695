"""Every failure as OpenAI's envelope: {"error": {"message", "type", "param", "code"}}."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from ..errors import EngineBusyError, TTSError

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "invalid_request_error",
    503: "server_error",
    504: "server_error",
}


def envelope(status: int, message: str, code: str | None = None, param: str | None = None) -> JSONResponse:
    body = {"message": message, "type": ERROR_TYPES.get(status, "server_error"), "param": param, "code": code}
    return JSONResponse({"error": body}, status_code=status)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(TTSError)
    async def tts_error(_: Request, exc: TTSError) -> JSONResponse:
        response = envelope(exc.status, str(exc), exc.code, getattr(exc, "param", None))
        if isinstance(exc, EngineBusyError):
            response.headers["Retry-After"] = str(max(1, round(exc.retry_after)))
        return response

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0]
        location = [str(part) for part in first.get("loc", ()) if part != "body"]
        param = ".".join(location) or None
        return envelope(400, f"{param or 'request'}: {first.get('msg', 'invalid value')}", "invalid_value", param)

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, exc: HTTPException) -> JSONResponse:
        return envelope(exc.status_code, str(exc.detail), None)
