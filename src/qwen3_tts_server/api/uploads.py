"""Uploaded files: read within the size limit."""

from __future__ import annotations

from fastapi import UploadFile

from ..errors import InvalidInputError, PayloadTooLargeError
from .schemas import MAX_UPLOAD_BYTES


async def read_upload(upload: UploadFile, param: str) -> bytes:
    """The uploaded file's bytes, refused when over the size limit or empty."""
    data = await upload.read(MAX_UPLOAD_BYTES + 1)
    if len(data) > MAX_UPLOAD_BYTES:
        raise PayloadTooLargeError(f"{param} is larger than the {MAX_UPLOAD_BYTES >> 20} MiB limit", param=param)
    if not data:
        raise InvalidInputError(f"{param} is empty", param=param)
    return data
