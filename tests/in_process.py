"""Drive an app in process: its lifespan runs, clients talk to it through the ASGI transport."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import httpx
import openai
from fastapi import FastAPI

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
