"""Voice cloning behaviour: prompt modes, persistence and identity, and every misuse refused clearly."""

from __future__ import annotations

import numpy as np
import pytest

from parity_cases import REF_TEXT, write_reference
from qwen3_tts_server.audio.reference import load_reference
from qwen3_tts_server.errors import InvalidInputError
from qwen3_tts_server.model.tts.prompt import SpeechInput
from qwen3_tts_server.model.tts.voice_prompt import VoicePrompt

REF = "ref_16k_mono.wav"


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    return load_reference(write_reference(tmp_path_factory.mktemp("ref"), REF).read_bytes())


@pytest.fixture(scope="module")
def in_context(models, reference) -> VoicePrompt:
    return models["base"].voice_encoder.encode(reference, REF_TEXT[REF])


def _greedy(model, voice, text="A sentence in the cloned voice.", frames=12):
    request = SpeechInput(text, "English", voice=voice)
    return model.generate([request], model.sampling().greedy(), max_frames=frames)[0].codes


def test_modes_hold_what_they_need(models, reference, in_context):
    x_vector = models["base"].voice_encoder.encode(reference, x_vector_only=True)
    assert in_context.mode == "in_context" and in_context.ref_text == REF_TEXT[REF]
    assert in_context.ref_codes.shape == (int(np.ceil(len(reference.samples) / 1920)), 16)
    assert x_vector.mode == "x_vector" and x_vector.ref_codes is None and x_vector.ref_text is None
    assert in_context.speaker_embedding.shape == x_vector.speaker_embedding.shape == (64,)
    assert not np.array_equal(_greedy(models["base"], in_context), _greedy(models["base"], x_vector))


def test_prompt_identity_is_a_content_hash(models, reference, in_context):
    base = models["base"]
    assert base.voice_encoder.encode(reference, REF_TEXT[REF]).id == in_context.id
    assert base.voice_encoder.encode(reference, "Another transcript.").id != in_context.id
    assert base.voice_encoder.encode(reference, REF_TEXT[REF], x_vector_only=True).id != in_context.id


def test_saved_prompt_reloads_and_speaks_the_same(models, in_context, tmp_path):
    in_context.save(tmp_path / "voice")
    loaded = VoicePrompt.load(tmp_path / "voice")
    assert (loaded.id, loaded.mode, loaded.ref_text, loaded.checkpoint) == (
        in_context.id,
        in_context.mode,
        in_context.ref_text,
        in_context.checkpoint,
    )
    np.testing.assert_array_equal(loaded.speaker_embedding.numpy(), in_context.speaker_embedding.numpy())
    np.testing.assert_array_equal(loaded.ref_codes.numpy(), in_context.ref_codes.numpy())
    np.testing.assert_array_equal(_greedy(models["base"], loaded), _greedy(models["base"], in_context))


def test_unreadable_prompt_files_are_refused(tmp_path):
    (tmp_path / "junk.json").write_text("{}")
    (tmp_path / "junk.safetensors").write_bytes(b"not safetensors")
    with pytest.raises(InvalidInputError, match="cannot read the voice prompt"):
        VoicePrompt.load(tmp_path / "junk")
    with pytest.raises(InvalidInputError, match="cannot read the voice prompt"):
        VoicePrompt.load(tmp_path / "missing")


def test_in_context_needs_a_transcript(models, reference):
    with pytest.raises(InvalidInputError, match="needs ref_text"):
        models["base"].voice_encoder.encode(reference, "  ")


@pytest.mark.parametrize("kind", ["custom_voice", "voice_design"])
def test_cloning_needs_a_base_checkpoint(models, reference, in_context, kind):
    with pytest.raises(InvalidInputError, match=f"needs a Base checkpoint.*{kind}"):
        models[kind].voice_encoder.encode(reference, REF_TEXT[REF])
    speaker = "Vivian" if kind == "custom_voice" else None
    with pytest.raises(InvalidInputError, match="cloned voices need a base checkpoint"):
        models[kind].prompts.build(SpeechInput("Hi.", "English", speaker=speaker, instruct="x", voice=in_context))


def test_base_requests_need_a_voice_and_take_no_speaker_or_instruction(models, in_context):
    base = models["base"]
    with pytest.raises(InvalidInputError, match="give a voice prompt"):
        base.prompts.build(SpeechInput("Hi.", "English"))
    with pytest.raises(InvalidInputError, match="no preset speakers"):
        base.prompts.build(SpeechInput("Hi.", "English", speaker="Vivian", voice=in_context))
    with pytest.raises(InvalidInputError, match="does not take an instruction"):
        base.prompts.build(SpeechInput("Hi.", "English", instruct="Whisper.", voice=in_context))


def test_prompt_from_another_checkpoint_is_refused(models, in_context):
    foreign = VoicePrompt(
        id=in_context.id,
        mode=in_context.mode,
        checkpoint="0" * 16,
        speaker_embedding=in_context.speaker_embedding,
        ref_codes=in_context.ref_codes,
        ref_text=in_context.ref_text,
    )
    with pytest.raises(InvalidInputError, match="built with another checkpoint"):
        models["base"].prompts.build(SpeechInput("Hi.", "English", voice=foreign))
