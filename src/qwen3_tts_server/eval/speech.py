"""`eval speech`: the round-trip error rate of a speech model in each configuration asked for, side by side. Every
configuration (a precision on a device) speaks the same sentences with the same seeds; one transcriber (ours, a
hosted Qwen3-ASR, its language forced to the sentence's) hears them all; each transcript is scored against its
sentence (`scoring.py`). Speed is the real-time factor of the synthesis (seconds spent over seconds spoken)."""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import soxr

from ..audio.reference import ReferenceAudio
from ..cli_progress import bar, transcription_progress
from ..config import Settings
from ..errors import InvalidInputError, TTSError
from ..model.asr.mel import SAMPLE_RATE
from ..text.language import LANGUAGE_NAMES
from .report import Row
from .scoring import Scored, error_rate, score
from .sentences import Sentence

if TYPE_CHECKING:
    from ..model.asr.transcriber import Transcriber

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Configuration:
    """A precision on a device, as `serve` would resolve DTYPE and QUANTIZE for it."""

    label: str  # as asked: "default", "float32", "bfloat16:int8"
    device: str
    dtype: str
    quantize: str | None


def configuration(spec: str, device: str) -> Configuration:
    """`default` (the server's precision there), `DTYPE` or `DTYPE:QUANTIZE` (QUANTIZE `none` for none)."""
    from ..cli_precision import flag_precision

    dtype, _, quantize = spec.partition(":")
    if spec == "default":
        dtype, quantize = "auto", "auto"
    try:
        settings = Settings.load(dtype=dtype or "auto", quantize=quantize or "none")
    except (ValueError, TTSError) as exc:
        raise InvalidInputError(f"configuration {spec!r}: {exc}", param="precision") from None
    precision = flag_precision(settings, device)
    return Configuration(spec, device, precision.dtype, precision.quantize)


def described(setup: Configuration) -> str:
    return f"{setup.dtype}, {setup.quantize or 'no'} quantisation, {setup.device}"


@dataclass(frozen=True)
class Clone:
    """A voice to clone (a Base model's): its reference recording, and its transcript for in-context cloning."""

    reference: ReferenceAudio
    text: str | None = None
    x_vector_only: bool = False


@dataclass(frozen=True)
class Spoken:
    sentence: Sentence
    audio: np.ndarray  # mono at `rate`
    rate: int
    spent: float  # seconds the synthesis took

    @property
    def seconds(self) -> float:
        return len(self.audio) / self.rate


def speak(
    checkpoint: str,
    setup: Configuration,
    sentences: Sequence[Sentence],
    speaker: str | None,
    seed: int,
    clone: Clone | None = None,
    instruct: str | None = None,
) -> list[Spoken]:
    """Every sentence spoken by the speech model in `setup` (in `clone`'s voice, cloned in that precision, or the
    preset `speaker`, by default the model's first; `instruct`: a VoiceDesign model's voice, a style for others):
    the n-th with seed `seed + n`, whatever the set."""
    from ..model.tts.tts_model import Qwen3TTSModel
    from ..service.speech.preparation import decoded, prepare_text
    from ..service.speech.requests import SamplingOverrides

    model = Qwen3TTSModel.load(checkpoint, device=setup.device, dtype=setup.dtype, quantize=setup.quantize)
    cloned = None
    if clone is not None:
        cloned = model.voice_encoder.encode(clone.reference, clone.text, x_vector_only=clone.x_vector_only)
    elif speaker is None and model.prompts.speakers:
        speaker = model.prompts.speakers[0]
    voice = model.prompts.check_voice(speaker, instruct, cloned)
    context = cloned.ref_codes if cloned is not None else None
    spoken: list[Spoken] = []
    with bar(len(sentences), "sentence", f"speaking ({setup.label})", every=0) as shown:  # each sentence shown
        for index, sentence in enumerate(sentences):
            started = time.perf_counter()
            params = SamplingOverrides(seed=seed + index).params(model)
            prepared = prepare_text(model, voice, sentence.text, LANGUAGE_NAMES[sentence.language], True, params)
            audio = np.concatenate(decoded(model, model.generate(prepared.inputs, prepared.params), context))
            spoken.append(Spoken(sentence, audio, model.sample_rate, time.perf_counter() - started))
            spent, seconds = sum(item.spent for item in spoken), sum(item.seconds for item in spoken)
            shown.set_postfix_str(f"{spent / seconds:.2f} s a second of speech", refresh=False)
            shown.update()
    del model
    gc.collect()
    return spoken


def preset_reference(checkpoint: str, speaker: str | None, device: str, seed: int) -> Clone:
    """The set's own reference for a clone: its reference sentence said by a preset `speaker` of the CustomVoice
    model `checkpoint` in float32, and that sentence as the reference's transcript."""
    import io

    import soundfile as sf

    from ..audio.reference import load_reference
    from .sentences import reference_sentence

    sentence = reference_sentence()
    (said,) = speak(checkpoint, configuration("float32", device), [sentence], speaker, seed)
    recording = io.BytesIO()
    sf.write(recording, said.audio, said.rate, format="WAV", subtype="PCM_16")
    return Clone(load_reference(recording.getvalue()), sentence.text)


def transcribe(transcriber: Transcriber, spoken: Sequence[Spoken]) -> list[str]:
    """What the transcriber hears in each, its language forced to the sentence's."""
    waves = [soxr.resample(item.audio, item.rate, SAMPLE_RATE).astype(np.float32) for item in spoken]
    languages = [LANGUAGE_NAMES[item.sentence.language] for item in spoken]
    with transcription_progress() as progress:
        heard = transcriber.transcribe(waves, languages, progress=progress)
    return [result.text for result in heard]


def similarities(checkpoint: str, device: str, clone: Clone, spoken: Sequence[Sequence[Spoken]]) -> list[list[float]]:
    """The cosine similarity of each clone's speech to the reference, by the Base model's own speaker encoder in
    float32 (one judge for every configuration)."""
    import torch

    from ..model.tts.tts_model import Qwen3TTSModel

    judge = Qwen3TTSModel.load(checkpoint, device=device, dtype="float32").voice_encoder.speaker_encoder
    if judge is None:
        raise InvalidInputError(f"{checkpoint} has no speaker encoder: clones are a Base model's", param="model")

    def embedding(audio: np.ndarray) -> torch.Tensor:
        return judge.embed(torch.from_numpy(np.ascontiguousarray(audio, dtype=np.float32))).float().cpu()

    reference = embedding(clone.reference.samples)
    return [
        [float(torch.nn.functional.cosine_similarity(reference, embedding(item.audio), dim=0)) for item in items]
        for items in spoken
    ]


def outcome(
    checkpoint: str,
    setup: Configuration,
    spoken: Sequence[Spoken],
    heard: Sequence[str],
    similarity: Sequence[float] | None = None,
) -> Row:
    """A configuration's line: its scores over all sentences and by language, its synthesis speed and, for a clone,
    its speech's mean similarity to the reference."""
    scored = [
        score(item.sentence.id, item.sentence.language, item.sentence.text, text)
        for item, text in zip(spoken, heard, strict=True)
    ]
    factor = sum(item.spent for item in spoken) / max(sum(item.seconds for item in spoken), 1e-9)
    figures = {"real_time_factor": factor}
    if similarity is not None:
        figures |= {"speaker_similarity": float(np.mean(similarity)), "lowest_similarity": min(similarity)}
    return row(checkpoint, setup, scored, figures)


def row(checkpoint: str, setup: Configuration, scored: Sequence[Scored], figures: dict[str, float]) -> Row:
    """A configuration's line of the report (speech's or recognition's): what it was, its error rate over all the
    sentences and in each language, and its `figures`."""
    codes = dict.fromkeys(item.language for item in scored)
    by_language = {code: error_rate([item for item in scored if item.language == code]) for code in codes}
    details = {"model": checkpoint, "device": setup.device, "dtype": setup.dtype, "quantize": setup.quantize}
    return Row(setup.label, details, error_rate(scored), by_language, figures, tuple(scored))


def evaluate(
    checkpoint: str,
    transcriber_checkpoint: str,
    setups: Sequence[Configuration],
    sentences: Sequence[Sentence],
    speaker: str | None = None,
    seed: int = 0,
    transcriber_setup: Configuration | None = None,
    said: Callable[[str], None] = log.info,
    clone: Clone | None = None,
    instruct: str | None = None,
) -> list[Row]:
    """Each configuration's line of the report, in order: all speak first (one model loaded at a time), then one
    transcriber hears everything (and, for a clone, one speaker encoder compares everything with the reference)."""
    from ..engine.recognition import load_transcriber

    spoken = []
    for setup in setups:
        said(f"speaking {len(sentences)} sentences in {setup.label} ({described(setup)})")
        spoken.append(speak(checkpoint, setup, sentences, speaker, seed, clone, instruct))
    similar: list[list[float] | None] = [None] * len(setups)
    if clone is not None:
        said("comparing each clone's speech with the reference")
        similar = list(similarities(checkpoint, setups[0].device, clone, spoken))
    heard_by = transcriber_setup or configuration("default", setups[0].device)
    said(f"transcribing with {transcriber_checkpoint} ({described(heard_by)})")
    transcriber = load_transcriber(transcriber_checkpoint, heard_by.device, heard_by.dtype, heard_by.quantize)
    return [
        outcome(checkpoint, setup, items, transcribe(transcriber, items), similarity)
        for setup, items, similarity in zip(setups, spoken, similar, strict=True)
    ]
