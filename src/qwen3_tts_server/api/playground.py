"""GET / and /playground: the web playground, a page and its files (api/playground/) served as they are in the
package: no build step, nothing fetched from elsewhere. The page calls the API with the key its user gives it."""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from importlib.resources import files

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from ..errors import NotFoundError

router = APIRouter()

CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
PAGE = "index.html"
# The page talks to its own origin only (the API, and its WebSocket: 'self' covers ws/wss to the same host);
# recordings and results are played and downloaded from blob: URLs.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; connect-src 'self'; img-src 'self' data: blob:; media-src 'self' blob:; "
    "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'self'"
)


@dataclass(frozen=True)
class Asset:
    body: bytes
    content_type: str
    etag: str


@functools.cache
def assets() -> dict[str, Asset]:
    """The playground's files by name, read once from the package. Only these names are ever served: a request's
    path never becomes a file path."""
    found = {}
    for entry in (files(__package__) / "playground").iterdir():
        content_type = CONTENT_TYPES.get("." + entry.name.rpartition(".")[2])
        if entry.is_file() and content_type is not None:
            body = entry.read_bytes()
            found[entry.name] = Asset(body, content_type, f'"{hashlib.sha256(body).hexdigest()[:20]}"')
    return found


def serve(asset: Asset, request: Request) -> Response:
    """The file, or 304 when the browser holds this version: it revalidates on every load (no hashed names to
    bust a cache with, so an upgraded server is never shown an old page)."""
    headers = {
        "ETag": asset.etag,
        "Cache-Control": "no-cache",
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": CONTENT_SECURITY_POLICY,
        "Referrer-Policy": "no-referrer",
    }
    if request.headers.get("if-none-match") == asset.etag:
        return Response(status_code=304, headers=headers)
    return Response(asset.body, media_type=asset.content_type, headers=headers)


@router.get("/", include_in_schema=False)
@router.get("/playground", include_in_schema=False)
async def page(request: Request) -> Response:
    return serve(assets()[PAGE], request)


@router.get("/playground/", include_in_schema=False)
async def page_with_slash() -> RedirectResponse:
    """The page's relative links resolve against /playground, not /playground/."""
    return RedirectResponse("../playground")


@router.get("/playground/{name}", include_in_schema=False)
async def playground_file(name: str, request: Request) -> Response:
    asset = assets().get(name)
    if asset is None:
        raise NotFoundError(f"the playground has no file {name!r}", param="name")
    return serve(asset, request)
