"""Translation of a transcript by an OpenAI-compatible chat model (TRANSLATE_BASE_URL, TRANSLATE_MODEL): Qwen3-ASR
transcribes but does not translate, so /v1/audio/translations transcribes, then asks that model, as the earlier
ASR server did. The model's answer is the translation, nothing around it; an answer that is not one is an error,
never passed off as the translation."""

from __future__ import annotations

import asyncio
import time

import httpx

from ...engine.jobs import RequestClock
from ...errors import NotImplementedFeatureError, TranscriptionTimeoutError, UpstreamError

NOT_CONFIGURED = (
    "Qwen3-ASR transcribes but does not translate: set TRANSLATE_BASE_URL (an OpenAI-compatible chat API) and "
    "TRANSLATE_MODEL for /v1/audio/translations to translate its transcripts"
)
INSTRUCTIONS = (
    "You translate transcripts of speech. Translate the user's message into {target}. Keep its meaning, names and "
    "numbers; answer with the translation alone, without quotes, notes or explanations."
)


class Translator:
    def __init__(self, base_url: str | None, model: str | None, api_key: str | None, timeout: float | None):
        self.base_url, self.model, self.api_key = base_url, model, api_key
        self.timeout = timeout or None

    @property
    def configured(self) -> bool:
        return bool(self.base_url and self.model)

    def check(self) -> None:
        if not self.configured:
            raise NotImplementedFeatureError(NOT_CONFIGURED)

    async def translate(
        self, text: str, target: str = "English", context: str = "", clock: RequestClock | None = None
    ) -> str:
        """`text` in `target` (a language's English name); an empty text is not sent. With `clock` (the request's,
        its audio's decoding and transcription counted), the model has the time left on it."""
        self.check()
        if not text.strip():
            return ""
        timeout = self.timeout
        if clock is not None and clock.deadline is not None:
            timeout = clock.deadline - time.monotonic()
            if timeout <= 0:
                raise TranscriptionTimeoutError(f"the request took longer than {clock.timeout:g} s (REQUEST_TIMEOUT)")
        system = INSTRUCTIONS.format(target=target) + (f" Context: {context}" if context else "")
        body = {
            "model": self.model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": text}],
            "temperature": 0.0,
            "stream": False,
        }
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        url = str(self.base_url).rstrip("/") + "/chat/completions"
        try:
            async with httpx.AsyncClient(timeout=timeout) as client:  # the time in all, not each read's
                answer = await asyncio.wait_for(client.post(url, json=body, headers=headers), timeout)
        except (asyncio.TimeoutError, httpx.TimeoutException) as exc:
            raise TranscriptionTimeoutError(f"the translation model did not answer in time ({timeout:.3g} s)") from exc
        except httpx.HTTPError as exc:
            raise UpstreamError(f"the translation model at {url} could not be reached: {exc}") from exc
        if answer.status_code != 200:
            raise UpstreamError(f"the translation model answered {answer.status_code}: {answer.text[:300]}")
        try:
            content = answer.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise UpstreamError(
                f"the translation model's answer is not a chat completion: {answer.text[:300]}"
            ) from exc
        if not isinstance(content, str):
            raise UpstreamError("the translation model's answer has no text")
        return content.strip()
