"""The preset voices for a Base checkpoint (`qwen3-tts-server make-preset-voices`).

A Base model speaks only cloned voices. The earlier server ran a Base model for everything and spoke the nine
named voices from recordings made once with the CustomVoice model; this does the same with its own parts: each
preset speaker of a CustomVoice checkpoint says a fixed reference text in its own language, seeded, and the Base
model clones the recording (through the same path as an upload) into a library voice named after the speaker.
A Base server then speaks "vivian", "Uncle Fu" or "alloy" like the CustomVoice model would (the names are
reserved for these voices: `voices.RESERVED_NAMES`). Made again, each replaces the one of its name.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable

import soundfile as sf

from ...audio.reference import load_reference
from ...errors import InvalidInputError
from ...model.tts.prompt import SpeechInput
from ...model.tts.tts_model import Qwen3TTSModel
from ...model.tts.voice_prompt import Mode
from .voice_library import StoredVoice, VoiceLibrary

log = logging.getLogger(__name__)

# What each speaker says, in its own language (the model card's: the dialect speakers speak Chinese).
REFERENCE_TEXTS = {
    "Chinese": "今天的天气很好，我们一起去公园散步，顺便聊聊最近读过的书。",
    "English": "The weather is lovely today, so we took a long walk in the park and talked about books.",
    "Japanese": "今日はとても良い天気なので、公園を散歩しながら最近読んだ本の話をしました。",
    "Korean": "오늘은 날씨가 정말 좋아서 공원을 산책하며 최근에 읽은 책에 대해 이야기했어요.",
}
SPEAKER_LANGUAGES = {"ryan": "English", "aiden": "English", "ono_anna": "Japanese", "sohee": "Korean"}
CONSENT = "made by make-preset-voices from the CustomVoice model's preset speaker"
MAX_REFERENCE_FRAMES = 250  # 20 s: every reference text is said in well under that


def make_preset_voices(
    custom_voice: Qwen3TTSModel,
    base: Qwen3TTSModel,
    library: VoiceLibrary,
    seed: int = 0,
    mode: Mode = "x_vector",
    max_frames: int = MAX_REFERENCE_FRAMES,
    progress: Callable[[str], None] = log.info,
) -> list[StoredVoice]:
    """One library voice per preset speaker of `custom_voice`, cloned by `base` from what the speaker says in
    `mode` (x_vector: the speaker embedding alone, as the earlier server's; in_context: with the recording's codes
    and its text, closer to the speaker for a longer prompt). `max_frames` bounds each recording."""
    if custom_voice.model_type != "custom_voice" or not custom_voice.speakers:
        raise InvalidInputError(f"--from needs a CustomVoice checkpoint; it is a {custom_voice.model_type} model")
    if base.model_type != "base":
        raise InvalidInputError(f"--model needs a Base checkpoint; it is a {base.model_type} model")
    made = []
    for speaker in custom_voice.speakers:
        language = SPEAKER_LANGUAGES.get(speaker, "Chinese")
        text = REFERENCE_TEXTS[language]
        request = SpeechInput(text, language, speaker=speaker)
        generated = custom_voice.generate([request], custom_voice.sampling(seed=seed), max_frames)[0]
        recording = io.BytesIO()
        sf.write(recording, custom_voice.decode(generated.codes), custom_voice.sample_rate, format="WAV")
        reference = load_reference(recording.getvalue())
        prompt = base.voice_encoder.encode(reference, ref_text=text, x_vector_only=mode == "x_vector")
        made.append(library.add(speaker, prompt, consent=CONSENT, replace=True))
        progress(f"{speaker}: {len(generated.codes)} frames of {language} -> {made[-1].id} ({mode})")
    return made
