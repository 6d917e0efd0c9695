"""Uploaded files: read within the size limit."""

from __future__ import annotations

from fastapi import UploadFile

from ..errors import InvalidInputError, PayloadTooLargeError
from .schemas import MAX_UPLOAD_BYTES


async def read_upload(upload: UploadFile, param: str, limit: int = MAX_UPLOAD_BYTES) -> bytes:
    """The uploaded file's bytes, refused when over the size limit (bytes) or empty."""
    data = await upload.read(limit + 1)
    if len(data) > limit:
        raise PayloadTooLargeError(f"{param} is larger than the {limit >> 20} MiB limit", param=param)
    if not data:
        raise InvalidInputError(f"{param} is empty", param=param)
    return data
