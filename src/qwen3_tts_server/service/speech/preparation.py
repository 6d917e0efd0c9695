"""A request's text made ready for the engine, once: the text front end's segments, each checked and
tokenized in the request's voice, each with its own seed. The server and `synth` share it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch

from ...audio.seams import fade_seams
from ...errors import EmptyInputError, NoSentencesError
from ...model.tts.prompt import TokenizedInput, VoiceSpec
from ...model.tts.sampling import SamplingParams
from ...model.tts.tts_model import Generated, Qwen3TTSModel
from ...text.frontend import TextSegment, text_segments

NOTHING_TO_SPEAK = (
    "input has nothing to speak: no letter or digit, nor a symbol read as words "
    "(only punctuation, emoji, marks or invisible characters)"
)


@dataclass(frozen=True)
class PreparedText:
    segments: list[TextSegment]
    inputs: list[TokenizedInput]  # one per segment
    params: list[SamplingParams]  # one per segment

    @property
    def text_tokens(self) -> int:
        return sum(len(prepared.text_ids) for prepared in self.inputs)


def prepare_text(
    model: Qwen3TTSModel,
    voice: VoiceSpec,
    text: str,
    language: str | None,
    normalize_text: bool,
    params: SamplingParams,
) -> PreparedText:
    """`text` in `voice`, cut into segments by the text front end."""
    model.prompts.check_language(language)  # the language as given, before the text is cut up
    segments = text_segments(text, language, normalize_text)
    if not segments:
        if not text.strip():
            raise EmptyInputError("input is empty", param="input")
        raise NoSentencesError(NOTHING_TO_SPEAK, param="input")
    inputs = [model.prompts.tokenize(voice, segment.text, segment.language) for segment in segments]
    # Each segment its own seed, derived from the request's: reproducible, yet not the same noise each time.
    seeds = [None if params.seed is None else params.seed + index for index in range(len(inputs))]
    return PreparedText(segments, inputs, [replace(params, seed=seed) for seed in seeds])


def decoded(model: Qwen3TTSModel, results: Sequence[Generated], context: torch.Tensor | None) -> list[np.ndarray]:
    """Each segment's codes as its audio, decoded after a clone's reference codes (`context`), the seams between
    segments faded: what `synth` and `eval` join into one recording."""
    last = len(results) - 1
    return [
        fade_seams(model.decode(result.codes, context=context), index > 0, index < last)
        for index, result in enumerate(results)
    ]
