"""Speech to text with a loaded Qwen3-ASR checkpoint, and word timestamps with a ForcedAligner, as the official
`transcribe()` gives them (docs/asr_reference.md, sections g to k): each clip cut into parts the model takes, each
part's features encoded alone and placed in its prompt (system turn with the context, forced language appended),
the parts decoded greedily side by side (`decoding.GreedyRows`), each output parsed, and a clip's parts joined.

Where this differs from the official package, on purpose: a part's token budget follows its length (16 a second,
at least 64) instead of a fixed 512, and a part that spends it is reported as truncated, not passed off as whole;
parts decode in a batch without changing what each gives alone (the official batch pads features and prompts,
which changes the outputs of its shorter rows)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ...audio.decoding import decode_audio
from ...errors import InvalidInputError
from ..quantization import quantization_state
from .aligner import ForcedAligner, TimedWord
from .decoding import GreedyRows
from .loading import AsrCheckpoint
from .long_audio import MAX_SECONDS, MAX_SECONDS_WITH_TIMESTAMPS, split_long_audio
from .mel import N_FFT, SAMPLE_RATE, checkpoint_features, model_wave
from .transcript import joined_parts, parse_transcript
from .word_split import WordSplitter

TOKENS_PER_SECOND = 16  # a part's default budget: far above speech's densest text (about 6 tokens a second)
MIN_BUDGET = 64
DEFAULT_ROWS = 8
MIN_SAMPLES = N_FFT // 2 + 1  # 12.6 ms: one feature frame


@dataclass(frozen=True)
class Transcription:
    language: str  # the official names of the languages heard, in order ("Chinese,English"); "" if none
    text: str
    seconds: float  # of audio
    part_tokens: list[list[int]]  # the ids each part generated, its stop token included
    truncated: bool  # a part spent its token budget before the model ended it
    words: list[TimedWord] | None = None

    @property
    def tokens(self) -> int:
        return sum(map(len, self.part_tokens))


@dataclass(frozen=True)
class Progress:
    parts_done: int
    parts: int
    tokens: int  # generated so far


@dataclass
class _Part:
    clip: int
    wave: np.ndarray
    offset: float
    language: str | None
    context: str
    tokens: list[int] | None = None
    truncated: bool = False


def prompt_text(context: str, language: str | None, audio_tokens: int) -> str:
    """The official chat prompt of one part: the system turn (its content the context), the audio, the assistant
    turn opened, and `language X<asr_text>` after it when the language is forced."""
    forced = f"language {language}<asr_text>" if language else ""
    return (
        f"<|im_start|>system\n{context}<|im_end|>\n<|im_start|>user\n<|audio_start|>"
        f"{'<|audio_pad|>' * audio_tokens}<|audio_end|><|im_end|>\n<|im_start|>assistant\n{forced}"
    )


def check_length(wave: np.ndarray, subject: str) -> None:
    """Refuse audio too short for one feature frame (the front end's window reflects half of itself at each end)."""
    if len(wave) < MIN_SAMPLES:
        have, need = 1000 * len(wave) / SAMPLE_RATE, 1000 * MIN_SAMPLES / SAMPLE_RATE
        raise InvalidInputError(
            f"{subject} is {have:.1f} ms long; at least {need:.1f} ms of audio is needed", param="file"
        )


def heard_wave(
    data: bytes, subject: str, param: str = "file", max_seconds: float | None = None, too_long: str = ""
) -> np.ndarray:
    """Audio bytes in any format PyAV reads as the model hears them (mono, 16 kHz), checked long enough and, with
    `max_seconds`, not too long (`decode_audio`)."""
    samples, rate = decode_audio(data, subject, param, max_seconds, too_long)
    wave = model_wave(samples.T, rate).numpy()
    check_length(wave, subject)
    return wave


def part_budget(samples: int) -> int:
    return max(MIN_BUDGET, int(np.ceil(samples / SAMPLE_RATE * TOKENS_PER_SECOND)))


class Transcriber:
    """A transcriber checkpoint, and optionally an aligner for word timestamps with the splitter of its words."""

    def __init__(
        self, model: AsrCheckpoint, aligner: AsrCheckpoint | None = None, splitter: WordSplitter | None = None
    ):
        if model.kind != "asr":
            raise InvalidInputError(f"{model.directory} is a {model.kind} checkpoint, not a transcriber", param="model")
        self.model = model
        self.splitter = splitter or WordSplitter()
        self.aligner = ForcedAligner(aligner, self.splitter) if aligner is not None else None

    model_type = "asr"  # as /health reports a loaded model's type

    @property
    def device(self) -> torch.device:
        return self.model.device

    @property
    def dtype(self) -> torch.dtype:
        return self.model.dtype

    @property
    def quantization_state(self) -> str:
        return quantization_state(self.model.quantization, self.model.quantization_failure)

    @torch.inference_mode()
    def encode(self, checkpoint: AsrCheckpoint, wave: np.ndarray) -> torch.Tensor:
        """A 16 kHz mono part's encoder output [tokens, hidden]."""
        return checkpoint.encoder(self.features(checkpoint, wave))

    @staticmethod
    def features(checkpoint: AsrCheckpoint, wave: np.ndarray) -> torch.Tensor:
        """[mel bins, frames] of a 16 kHz mono part, in the model's dtype (`mel.checkpoint_features`)."""
        return checkpoint_features(wave, checkpoint.device, checkpoint.dtype)

    def prompt_ids(self, context: str, language: str | None, audio_tokens: int, prefix: str = "") -> torch.Tensor:
        """The prompt's ids, the assistant's answer begun with `prefix` (a live stream's text so far)."""
        ids = self.model.tokenizer.encode(prompt_text(context, language, audio_tokens) + prefix)
        return torch.tensor(ids, device=self.model.device)

    def embedded_prompt(self, wave: np.ndarray, context: str = "", language: str | None = None) -> torch.Tensor:
        """[tokens, hidden]: a part's prompt with its audio in place, ready to join a `GreedyRows`."""
        return self.embedded_prompts([(wave, context, language)])[0]

    @torch.inference_mode()
    def embedded_prompts(self, parts: Sequence[tuple[np.ndarray, str, str | None]]) -> list[torch.Tensor]:
        """`embedded_prompt` of several parts (wave, context, language), their audio encoded together
        (`AudioEncoder.encode_many`: packed on CUDA)."""
        model = self.model
        audio = model.encoder.encode_many([self.features(model, wave) for wave, _, _ in parts])
        return [
            model.decoder.embed_prompt(
                self.prompt_ids(context, language, len(encoded)), encoded, model.tokens.audio_pad
            )
            for (_, context, language), encoded in zip(parts, audio, strict=True)
        ]

    @property
    def stop_tokens(self) -> frozenset[int]:
        """The tokens that end a row (the official generate()'s end-of-sequence ids)."""
        return self.model.tokens.stop

    def rows(self, slots: int, graphs: bool | None = None) -> GreedyRows:
        """Decoding rows for this model (`graphs`: CUDA graphs of the static step, None: on CUDA)."""
        return GreedyRows(self.model.decoder, self.model.head, self.stop_tokens, slots, graphs=graphs)

    def transcribe(
        self,
        waves: Sequence[np.ndarray],
        languages: Sequence[str | None] | None = None,
        contexts: Sequence[str] | None = None,
        timestamps: bool = False,
        max_new_tokens: int | None = None,
        rows: int = DEFAULT_ROWS,
        progress: Callable[[Progress], None] | None = None,
    ) -> list[Transcription]:
        """16 kHz mono clips -> their transcriptions. `languages` (official names, None: identified) and `contexts`
        are per clip; `max_new_tokens` fixes every part's budget; `rows` parts decode at a time."""
        languages = list(languages) if languages is not None else [None] * len(waves)
        contexts = list(contexts) if contexts is not None else [""] * len(waves)
        if not len(languages) == len(contexts) == len(waves):
            raise ValueError("one language and one context per clip")
        for index, wave in enumerate(waves):
            check_length(wave, f"clip {index}")
        if timestamps and self.aligner is None:
            raise InvalidInputError("word timestamps need a ForcedAligner checkpoint", param="timestamp_granularities")
        for language in languages if timestamps else ():
            self.splitter.prepare(language or "")
        longest = MAX_SECONDS_WITH_TIMESTAMPS if timestamps else MAX_SECONDS
        parts = [
            _Part(clip, part, offset, language, context)
            for clip, (wave, language, context) in enumerate(zip(waves, languages, contexts, strict=True))
            for part, offset in split_long_audio(wave, SAMPLE_RATE, longest)
        ]
        self._decode(parts, max_new_tokens, rows, progress)
        parsed = [parse_transcript(self._text(part), part.language) for part in parts]
        aligned = self._align(parts, parsed) if timestamps else [None] * len(parts)
        results = []
        for clip, wave in enumerate(waves):
            mine = [i for i, part in enumerate(parts) if part.clip == clip]
            words = [word for i in mine for word in aligned[i] or []] if timestamps else None
            language, text = joined_parts([parsed[i] for i in mine])
            results.append(
                Transcription(
                    language=language,
                    text=text,
                    seconds=len(wave) / SAMPLE_RATE,
                    part_tokens=[parts[i].tokens or [] for i in mine],
                    truncated=any(parts[i].truncated for i in mine),
                    words=words,
                )
            )
        return results

    def _text(self, part: _Part) -> str:
        return self.model.tokenizer.decode(part.tokens or [], skip_special=True)

    def _decode(
        self, parts: list[_Part], max_new_tokens: int | None, slots: int, progress: Callable[[Progress], None] | None
    ) -> None:
        """Every part's tokens, `slots` parts decoding at a time, a waiting part joining as soon as a slot frees."""
        decoding = self.rows(max(1, min(slots, len(parts))))
        waiting = list(range(len(parts)))[::-1]
        running: dict[int, _Part] = {}  # by row id
        done = generated = 0
        while waiting or running:
            joining = [parts[waiting.pop()] for _ in range(min(len(waiting), decoding.free_slots))]
            emitted = []
            if joining:  # encoded and prefilled together (on CUDA; one at a time on a CPU)
                prompts = self.embedded_prompts([(part.wave, part.context, part.language) for part in joining])
                budgets = [max_new_tokens or part_budget(len(part.wave)) for part in joining]
                for part, (row, (first,)) in zip(joining, decoding.join_many(prompts, budgets), strict=True):
                    part.tokens = []
                    running[row] = part
                    emitted.append(first)
            emitted += decoding.step()
            for token in emitted:
                part = running[token.row]
                assert part.tokens is not None
                part.tokens.append(token.token)
                if token.finished:
                    part.truncated = token.token not in decoding.stop
                    del running[token.row]
                    done += 1
            generated += len(emitted)
            if progress is not None:
                progress(Progress(done, len(parts), generated))

    def _align(self, parts: list[_Part], parsed: list[tuple[str, str]]) -> list[list[TimedWord] | None]:
        spoken = [(part, language, text) for part, (language, text) in zip(parts, parsed, strict=True) if text.strip()]
        aligned = iter(self.align_many([(part.wave, text, language, part.offset) for part, language, text in spoken]))
        return [next(aligned) if text.strip() else None for _, text in parsed]

    def align(self, wave: np.ndarray, text: str, language: str, offset: float = 0.0) -> list[TimedWord]:
        """The words of one part's transcript (`text`, heard as `language`) with their times in the clip, the part
        starting `offset` seconds into it."""
        return self.align_many([(wave, text, language, offset)])[0]

    def align_many(self, parts: Sequence[tuple[np.ndarray, str, str, float]]) -> list[list[TimedWord]]:
        """`align` of several parts (wave, text, language, offset), by the aligner (`ForcedAligner.align_many`)."""
        if self.aligner is None:
            raise InvalidInputError("word timestamps need a ForcedAligner checkpoint", param="timestamp_granularities")
        return self.aligner.align_many(parts)
