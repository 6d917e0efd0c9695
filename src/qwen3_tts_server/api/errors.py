"""Every failure as OpenAI's envelope: {"error": {"message", "type", "param", "code"}}."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from ..errors import EngineBusyError, TTSError, error_body, invalid_value
from ..http_contract import error_object
from .context import request_context
from .schemas import MAX_UPLOAD_BYTES

MULTIPART_OVERHEAD = 64 * 1024  # room for the form's other fields and boundaries


def envelope(status: int, message: str, code: str | None = None, param: str | None = None) -> JSONResponse:
    return JSONResponse({"error": error_object(status, message, code, param)}, status_code=status)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(TTSError)
    async def tts_error(request: Request, exc: TTSError) -> JSONResponse:
        request_context(request).error_type = exc.code  # for the request log and the errors metric
        response = JSONResponse({"error": error_body(exc)}, status_code=exc.status)
        if isinstance(exc, EngineBusyError):
            response.headers["Retry-After"] = str(exc.retry_after)
        return response

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        return await tts_error(request, invalid_value(exc.errors()))

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, exc: HTTPException) -> JSONResponse:
        return envelope(exc.status_code, str(exc.detail), None)


def limit_upload_size(app: FastAPI) -> None:
    """Refuse a multipart body whose declared length is over the upload limit before reading any of it
    (413); the routes check the parsed file's size too, for bodies sent without a length."""

    @app.middleware("http")
    async def refuse_large_uploads(request: Request, call_next):
        declared = request.headers.get("content-length", "")
        multipart = request.headers.get("content-type", "").startswith("multipart/")
        if multipart and declared.isdigit() and int(declared) > MAX_UPLOAD_BYTES + MULTIPART_OVERHEAD:
            return envelope(
                413, f"the upload is larger than the {MAX_UPLOAD_BYTES >> 20} MiB limit", "payload_too_large"
            )
        return await call_next(request)
