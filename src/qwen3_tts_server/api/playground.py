"""GET / and /playground: the web playground (its files under api/playground/)."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
