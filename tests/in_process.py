"""Drive an app in process: its lifespan runs, clients talk to it through the ASGI transport."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import httpx
import openai
from fastapi import FastAPI

from qwen3_tts_server.api.app import create_app
from qwen3_tts_server.config import Settings
from qwen3_tts_server.engine.model_manager import ModelManager

Scenario = Callable[[openai.AsyncOpenAI, httpx.AsyncClient], Awaitable]


def run_in_app(app: FastAPI, scenario: Scenario, api_key: str = "unused"):
    """Run `scenario(openai_client, httpx_client)` with the app started, and return what it returns."""

    async def main():
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
                client = openai.AsyncOpenAI(api_key=api_key, base_url="http://test/v1", http_client=http)
                return await scenario(client, http)

    return asyncio.run(main())


def make_app(model, **settings) -> FastAPI:
    """An app for tests: `model` (a Qwen3TTSModel or a ModelManager) and `settings` over test defaults (no
    output cache, no request timeout, the model id "tiny")."""
    if not isinstance(model, ModelManager):
        model = ModelManager.fixed(model)
    defaults = {"model_id": "tiny", "audio_cache_max": 0, "request_timeout": 0}
    return create_app(Settings.load(**{**defaults, **settings}), model)
