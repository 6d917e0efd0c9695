"""The forced aligner gives the official word timestamps (tests/fixtures/asr): its words, its prompt ids, the step
at every timestamp slot from the official features, and the official repair of those steps; the words split from a
transcript as the official package splits them, Japanese by nagisa, Korean by the official rule over a word list."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from asr_cases import (
    ALIGN_CASES,
    ASR_CHECKPOINTS,
    ASR_FIXTURE_DIR,
    REPAIR_CASES,
    WORD_SPLIT_CASES,
    write_word_list,
)
from qwen3_tts_server.errors import ConfigurationError
from qwen3_tts_server.model.asr import word_split
from qwen3_tts_server.model.asr.aligner import (
    aligner_prompt,
    repair_timestamps,
    slot_steps,
    timed_words,
)
from qwen3_tts_server.model.asr.decoder import AsrDecoder
from qwen3_tts_server.model.asr.encoder import AudioEncoder, AudioEncoderConfig
from qwen3_tts_server.model.asr.word_split import WordSplitter, spaced_words
from qwen3_tts_server.model.text_tokenizer import TextTokenizer
from qwen3_tts_server.testing.random_asr_checkpoint import asr_token_id, make_asr_test_model

ORACLE = json.loads((ASR_FIXTURE_DIR / "oracle.json").read_text(encoding="utf-8"))
FEATURES = np.load(ASR_FIXTURE_DIR / "features.npz")
KIND = "forced_aligner"


@pytest.fixture(scope="module")
def aligner(tmp_path_factory):
    directory = make_asr_test_model(tmp_path_factory.mktemp("aligner") / KIND, **ASR_CHECKPOINTS[KIND])
    config = json.loads((directory / "config.json").read_text())
    encoder = AudioEncoder(AudioEncoderConfig.parse(config["thinker_config"]["audio_config"]))
    decoder = AsrDecoder(config["thinker_config"]["text_config"])
    weights = load_file(directory / "model.safetensors")
    for module, prefix in ((encoder, "thinker.audio_tower."), (decoder, "thinker.model.")):
        module.load_state_dict({k.removeprefix(prefix): v for k, v in weights.items() if k.startswith(prefix)})
    head = torch.nn.Linear(decoder.cfg.hidden_size, len(weights["thinker.lm_head.weight"]), bias=False)
    head.load_state_dict({"weight": weights["thinker.lm_head.weight"]})
    return encoder.eval(), decoder.eval(), head, TextTokenizer.from_directory(directory)


@pytest.fixture(scope="module")
def splitter(tmp_path_factory):
    return WordSplitter(write_word_list(tmp_path_factory.mktemp("korean") / "words.dict"))


@pytest.mark.parametrize("case", ALIGN_CASES)
def test_the_aligner_gives_the_official_timestamps(aligner, splitter, case):
    encoder, decoder, head, tokenizer = aligner
    spec, recorded = ALIGN_CASES[case], ORACLE["align"][case]
    words = splitter.words(spec["text"], spec["language"])
    assert words == [item["text"] for item in recorded["items"]]
    with torch.inference_mode():
        audio = encoder(torch.from_numpy(FEATURES[spec["audio"]].copy()))
    ids = torch.tensor(tokenizer.encode(aligner_prompt(words, len(audio))))
    assert ids.tolist() == recorded["input_ids"][0]
    embedded = decoder.embed_prompt(ids, audio, asr_token_id("<|audio_pad|>", KIND))
    (steps,) = slot_steps(decoder, head, [embedded], [ids], asr_token_id("<timestamp>", KIND))
    assert steps == recorded["slot_classes"]
    assert timed_words(words, steps, 80) == [(i["text"], i["start"], i["end"]) for i in recorded["items"]]


def test_prompts_aligned_together_give_each_ones_steps(aligner, splitter):
    """The official cases' prompts in one packed causal pass (the GPU's way), each attending within itself: every
    slot's step as the prompt alone gives it."""
    encoder, decoder, head, tokenizer = aligner
    prompts, ids = [], []
    for spec in ALIGN_CASES.values():
        with torch.inference_mode():
            audio = encoder(torch.from_numpy(FEATURES[spec["audio"]].copy()))
        words = splitter.words(spec["text"], spec["language"])
        ids.append(torch.tensor(tokenizer.encode(aligner_prompt(words, len(audio)))))
        prompts.append(decoder.embed_prompt(ids[-1], audio, asr_token_id("<|audio_pad|>", KIND)))
    slot = asr_token_id("<timestamp>", KIND)
    together = slot_steps(decoder, head, prompts, ids, slot, packed=True)
    assert len(prompts) > 1 and together == slot_steps(decoder, head, prompts, ids, slot)
    assert together == [ORACLE["align"][case]["slot_classes"] for case in ALIGN_CASES]


def test_words_keep_letters_digits_and_apostrophes_and_split_ideographs():
    assert spaced_words("Don't stop-me now, 3.5 times!") == ["Don't", "stopme", "now", "35", "times"]
    assert spaced_words("漢字とカナ mixed中文text") == ["漢", "字", "とカナ", "mixed", "中", "文", "text"]


@pytest.mark.parametrize(("case", "official"), list(zip(WORD_SPLIT_CASES, ORACLE["words"], strict=True)))
def test_words_are_split_as_the_official_package_splits_them(splitter, case, official):
    text, language = case
    assert splitter.words(text, language) == official


def test_korean_needs_the_official_word_list_and_says_where_it_is(monkeypatch, tmp_path):
    monkeypatch.setattr(word_split, "OFFICIAL_DISTRIBUTION", "qwen-asr-not-installed")
    with pytest.raises(ConfigurationError, match="pip download qwen-asr==0.0.6 --no-deps") as refused:
        WordSplitter().words("서울의 날씨", "Korean")
    assert refused.value.param == "korean_words"
    with pytest.raises(ConfigurationError, match="cannot read the Korean word list .*missing.dict"):
        WordSplitter(tmp_path / "missing.dict").prepare("Korean")
    assert WordSplitter().words("Hello there", "English") == ["Hello", "there"]  # other languages need no list


def test_an_installed_official_package_lends_its_korean_word_list(monkeypatch, tmp_path):
    """Found in the distribution's files without importing it (the official package needs transformers)."""
    listed = tmp_path / word_split.OFFICIAL_KOREAN_LIST
    listed.parent.mkdir(parents=True)
    write_word_list(listed, ["서울"])
    info = tmp_path / "qwen_asr-0.0.6.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: qwen-asr\nVersion: 0.0.6\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert word_split.installed_korean_list() == listed
    assert WordSplitter().words("서울의 날씨는", "Korean") == ["서울", "의", "날씨는"]


def test_loading_the_japanese_segmenter_leaves_float_arithmetic_as_it_was():
    """DyNet (under nagisa) is built with -ffast-math: loading it would flush subnormals to zero in the loading
    thread. In a fresh process, where it is loaded for the first time."""
    script = (
        "import sys; from qwen3_tts_server.model.asr.word_split import japanese_words as words; "
        "print(words('東京です'), sys.float_info.min / 2 > 0, 'dynet' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["['東京',", "'です']", "True", "True"], done.stderr


def test_japanese_without_its_segmenter_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "nagisa", None)  # import nagisa raises ImportError
    monkeypatch.setattr(word_split, "_nagisa", word_split._nagisa.__wrapped__)
    with pytest.raises(ConfigurationError, match=r"pip install 'qwen3-tts-server\[japanese\]'"):
        WordSplitter().prepare("Japanese")


@pytest.mark.parametrize(("raw", "official"), list(zip(REPAIR_CASES, ORACLE["align"]["repair"], strict=True)))
def test_timestamps_are_repaired_as_the_official_aligner_repairs_them(raw, official):
    assert repair_timestamps(raw) == official
