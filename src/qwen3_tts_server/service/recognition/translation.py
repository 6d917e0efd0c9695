"""Translation of a transcript by an OpenAI-compatible chat model (TRANSLATE_BASE_URL, TRANSLATE_MODEL): Qwen3-ASR
transcribes but does not translate, so /v1/audio/translations transcribes, then asks that model, as the earlier
ASR server did. The model's answer is the translation, nothing around it; an answer that is not one is an error,
never passed off as the translation."""

from __future__ import annotations

import httpx

from ...errors import NotImplementedFeatureError, RequestTimeoutError, UpstreamError

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

    async def translate(self, text: str, target: str = "English", context: str = "") -> str:
        """`text` in `target` (a language's English name); an empty text is not sent."""
        self.check()
        if not text.strip():
            return ""
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
            async with httpx.AsyncClient(timeout=self.timeout) as client:
                answer = await client.post(url, json=body, headers=headers)
        except httpx.TimeoutException as exc:
            raise RequestTimeoutError(f"the translation model did not answer in {self.timeout} s") from exc
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
