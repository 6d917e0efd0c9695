"""Text that cannot break the server: arbitrary Unicode (emoji sequences, bidi controls, zero-width and control
characters, long runs of combining marks, words thousands of characters long, mixed scripts, lone surrogates,
NUL, BOM, private-use characters, noncharacters) through the text front end and POST /v1/audio/speech.

The front end never raises, keeps every letter and digit in order, and hands the model only text that is valid
Unicode with something to say. The API answers such text with audio, or with a 400 envelope that names `input`
and says why; never a 500, never a hang."""

from __future__ import annotations

import asyncio
import io
import json
import unicodedata

import httpx
import numpy as np
import pytest
import soundfile
from anyio.from_thread import start_blocking_portal
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from in_process import make_app
from qwen3_tts_server.text.cleanup import remove_unspoken
from qwen3_tts_server.text.frontend import SEGMENT_MAX_CHARS, text_segments
from qwen3_tts_server.text.language import detect_language
from qwen3_tts_server.text.normalize import LANGUAGES, normalize
from qwen3_tts_server.text.segment import IncrementalSegmenter, speech_segments, split_sentences

MAX_INPUT = 4096  # the API's limit on `input`
# Derandomized and without an example database: the same examples on every run, in CI too.
FRONT_END = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)
HTTP = settings(FRONT_END, max_examples=50)

EMOJI = [
    "😀", "👨\u200d👩\u200d👧\u200d👦", "🏳️\u200d🌈", "👍🏽", "👩🏿\u200d🚀", "🧑\u200d🤝\u200d🧑", "🇯🇵", "🇺🇸🇫🇷",
    "1️⃣", "#️⃣", "❤️", "🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f", "\U0001f3fb",
]  # fmt: skip
BIDI_CONTROLS = "\u200e\u200f\u061c\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff\u00ad\u180e\u034f\ufe0f"
CONTROLS = "".join(map(chr, [*range(0x20), 0x7F, *range(0x80, 0xA0)]))
NONCHARACTERS = [chr(c) for c in range(0xFDD0, 0xFDF0)] + [
    chr(plane + end) for plane in (0, 0x10000, 0x100000) for end in (0xFFFE, 0xFFFF)
]
SPACES = " \t\n\r\x0b\x0c\x85\xa0\u1680\u2009\u2028\u2029\u3000"
SCRIPTS = [
    (0x41, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x5FF), (0x600, 0x6FF), (0x900, 0x97F), (0xE00, 0xE7F),
    (0x3041, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3),
]  # fmt: skip

letters = st.one_of(*(st.characters(categories=["L"], min_codepoint=low, max_codepoint=high) for low, high in SCRIPTS))
words = st.text(letters, min_size=1, max_size=12)
marks = st.characters(categories=["Mn", "Mc", "Me"])
lone_surrogates = st.characters(categories=["Cs"])
pieces = st.one_of(
    words,
    st.sampled_from(EMOJI),
    st.sampled_from(BIDI_CONTROLS + ZERO_WIDTH + CONTROLS + SPACES),
    st.sampled_from(NONCHARACTERS),
    lone_surrogates,
    st.characters(categories=["Co"]),  # private use
    st.characters(exclude_categories=()),  # anything at all, lone surrogates and unassigned code points too
    st.text(marks, min_size=1, max_size=40),
    st.builds(lambda base, mark, n: base + mark * n, letters, marks, st.integers(100, 2000)),  # a combining run
    st.builds(lambda word, n: (word * n)[:n], words, st.integers(300, 3000)),  # a word thousands of characters long
    st.from_regex(r"[0-9]{1,12}([.,:/-][0-9]{1,4})?", fullmatch=True),
    st.sampled_from(
        [".", "!", "?", ",", ";", ":", "—", "…", "。", "，", "、", "「", "」", "(", ")", '"', "$", "%", "&"]
    ),
)
# Pieces glued together: a word runs into an emoji, a control character or a mark as easily as into a space.
texts = st.lists(pieces, max_size=12).map(lambda parts: "".join(parts)[:MAX_INPUT])
front_end_languages = st.sampled_from([None, "auto", *LANGUAGES, "beijing_dialect"])

NASTY = {
    "lone surrogate": "Hello \ud800 world, \udfff bye.",
    "NUL": "Hello\x00world. Second\x00 sentence.",
    "BOM": "\ufeffHello world.",
    "emoji sequences": "👨\u200d👩\u200d👧\u200d👦 went out 👍🏽 🇯🇵🇺🇸 today.",
    "bidi controls": "\u202eHello\u202c \u200fשלום\u200e and \u2067مرحبا\u2069 everyone.",
    "zero-width": "Zero\u200bwidth\u200c joiners\u2060 here.",
    "C0 and C1 controls": "Ring\x07 the\x1b[31m bell\x7f\x85\x9f now.",
    "combining run": "Zalgo e" + "\u0301" * 3000 + " text.",
    "combining marks only": "\u0301\u0308" * 600,
    "long word": "Supercali" + "fragilistic" * 300,
    "mixed scripts": "Hello мир 世界 こんにちは 안녕 مرحبا שלום नमस्ते สวัสดี 123.",
    "private use and noncharacters": "Private \ue000\U000f0000 use \ufdd0\uffff\U0010ffff here.",
    "only emoji": "😀😀 👍🏽",
    "only punctuation": "... !!! ???",
    "only controls": "\x00\x01\u200b\ufeff",
}


def with_nasty_examples(*arguments):
    """Every NASTY text as an explicit example of a property, with `arguments` after it."""

    def decorate(test):
        for text in NASTY.values():
            test = example(text, *arguments)(test)
        return test

    return decorate


def visible(text: str) -> str:
    return "".join(text.split())


def alphanumerics(text: str) -> str:
    return "".join(char for char in text if char.isalnum())


def is_unicode(text: str) -> bool:
    """Valid Unicode text: encodable as UTF-8 (no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def is_subsequence(part: str, whole: str) -> bool:
    rest = iter(whole)
    return all(char in rest for char in part)


def never_spoken(char: str) -> bool:
    """Characters the front end removes (documented in text/cleanup.py): control characters other than
    whitespace, invisible format characters but ZWJ and ZWNJ, lone surrogates and noncharacters."""
    category = unicodedata.category(char)
    if category == "Cc":
        return not char.isspace()
    if category == "Cf":
        return char not in "\u200c\u200d"
    return category == "Cs" or char in NONCHARACTERS or (ord(char) & 0xFFFF) >= 0xFFFE


# -- the text front end ----------------------------------------------------------------------------------------


@FRONT_END
@given(texts, st.sampled_from(LANGUAGES))
def test_normalize_never_raises_and_is_idempotent(text: str, language: str) -> None:
    spoken = normalize(text, language)
    assert spoken == spoken.strip() and normalize(spoken, language) == spoken
    assert is_unicode(spoken) or not is_unicode(text)


@FRONT_END
@given(texts, front_end_languages, st.booleans())
@with_nasty_examples(None, True)
@with_nasty_examples("english", False)
def test_front_end_keeps_every_letter_and_digit_and_speaks_only_unicode(
    text: str, language: str | None, normalize_text: bool
) -> None:
    segments = text_segments(text, language, normalize_text)
    sources = "".join(segment.source for segment in segments)
    assert alphanumerics(sources) == alphanumerics(text)
    assert is_subsequence(visible(sources), visible(text))
    for segment in segments:
        assert len(segment.source) <= SEGMENT_MAX_CHARS
        assert segment.language in (*LANGUAGES, "auto") or segment.language == language
        spoken = segment.text
        assert spoken == spoken.strip() and is_unicode(spoken) and not any(map(never_spoken, spoken))
        assert alphanumerics(spoken), f"nothing to speak in {spoken!r}"
        if not normalize_text:
            assert spoken == segment.source


@FRONT_END
@given(texts, st.sampled_from([None, *LANGUAGES]), st.integers(8, 300))
@with_nasty_examples(None, SEGMENT_MAX_CHARS)
def test_segmenting_never_raises_and_loses_nothing(text: str, language: str | None, max_chars: int) -> None:
    assert visible("".join(split_sentences(text, language))) == visible(text)
    segments = speech_segments(text, language, max_chars)
    assert visible("".join(segments)) == visible(text)
    assert all(len(segment) <= max_chars for segment in segments)


@FRONT_END
@given(texts, st.lists(st.integers(0, MAX_INPUT), max_size=20), st.sampled_from([None, *LANGUAGES]))
def test_incremental_segmenter_in_any_pieces_never_raises_and_loses_nothing(
    text: str, cuts: list[int], language: str | None
) -> None:
    bounds = sorted({0, len(text), *(cut for cut in cuts if cut < len(text))})

    def fed(pieces: list[str]) -> list[str]:
        segmenter = IncrementalSegmenter(language)
        return [segment for piece in pieces for segment in segmenter.feed(piece)] + [segmenter.flush()]

    segments = fed([text[a:b] for a, b in zip(bounds, bounds[1:], strict=False)])
    assert segments == fed([text])
    assert visible("".join(segments)) == visible(text)


@FRONT_END
@given(texts)
@with_nasty_examples()
def test_language_detection_never_raises(text: str) -> None:
    assert detect_language(text) in (None, *LANGUAGES)


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("Hello\x00 wor\u200bld\ufeff.", "Hello world."),
        ("\u202eabc\u202c \u200fשלום\u200e \u2067مرحبا\u2069", "abc שלום مرحبا"),
        ("Ring\x07 the\x1b bell\x7f\x9f.\r\n\tNext\x85line", "Ring the bell.\r\n\tNext\x85line"),
        ("Lone \ud800 half, \ufdd0 \uffff nonchars, \ue000 private", "Lone  half,   nonchars, \ue000 private"),
        ("👨\u200d👩\u200d👧 1️⃣ 👍🏽 🏴\U000e0067\U000e0062\U000e007f", "👨\u200d👩\u200d👧 1️⃣ 👍🏽 🏴"),
        ("می\u200cخواهم", "می\u200cخواهم"),  # a zero-width non-joiner shapes Persian: kept
    ],
)
def test_characters_never_read_are_removed_and_joiners_kept(text: str, kept: str) -> None:
    assert remove_unspoken(text) == kept
    assert [segment.source for segment in text_segments(text, "english", normalize_text=False)] == [kept.strip()]


def test_a_long_combining_run_is_cut_between_characters_not_inside_one() -> None:
    cluster = "e" + "\u0301\u0323\u0308" * 2  # one letter with six marks: 300 is not a multiple of its length
    segments = speech_segments(cluster * 100, None, SEGMENT_MAX_CHARS)
    assert "".join(segments) == cluster * 100
    assert all(segment.startswith("e") for segment in segments)


def test_an_emoji_sequence_is_not_cut_inside() -> None:
    family = "👨\u200d👩\u200d👧\u200d👦"  # seven code points
    segments = speech_segments(family * 100, None, 100)
    assert "".join(segments) == family * 100
    assert all(segment.startswith("👨") and segment.endswith("👦") for segment in segments)


# -- POST /v1/audio/speech -----------------------------------------------------------------------------------

FRAMES = 3  # frames per segment: a 4096-character input stays quick on a random model


@pytest.fixture(scope="module")
def post_speech(models, tmp_path_factory):
    """post(JSON body bytes) -> the response of POST /v1/audio/speech, from one in-process app up for the module."""
    app = make_app(
        models["custom_voice"],
        data_dir=tmp_path_factory.mktemp("unicode-input"),
        max_batch_size=4,
        max_request_frames=FRAMES,
    )

    async def post(http: httpx.AsyncClient, body: bytes) -> httpx.Response:
        async with asyncio.timeout(60):  # a hang fails the test instead of stalling the suite
            return await http.post("/v1/audio/speech", content=body, headers={"Content-Type": "application/json"})

    with start_blocking_portal() as portal, portal.wrap_async_context_manager(app.router.lifespan_context(app)):
        transport = httpx.ASGITransport(app=app)
        client = httpx.AsyncClient(transport=transport, base_url="http://test")
        with portal.wrap_async_context_manager(client) as http:
            yield lambda body: portal.call(post, http, body)


def speech_body(text: str, normalize_text: bool) -> bytes:
    """The JSON a client sends; json.dumps escapes a lone surrogate as "\\ud800", as JavaScript's JSON does."""
    fields = {"input": text, "voice": "vivian", "response_format": "wav", "stream": False, "normalize": normalize_text}
    return json.dumps(fields).encode("ascii")


def check_refusal(response: httpx.Response) -> str:
    """A 400 in OpenAI's envelope that names `input`; its message."""
    assert response.status_code == 400, (response.status_code, response.headers["content-type"])
    error = response.json()["error"]
    assert error["param"] == "input" and error["type"] == "invalid_request_error"
    assert "input" in error["message"]
    return error["message"]


def check_audio(response: httpx.Response) -> None:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "audio/wav"
    samples, rate = soundfile.read(io.BytesIO(response.content))
    assert rate == 24000 and len(samples) > 0 and np.isfinite(samples).all()


@HTTP
@given(texts, st.booleans())
@with_nasty_examples(True)
def test_speech_answers_any_text_with_audio_or_a_400_naming_input(post_speech, text: str, normalize_text: bool):
    response = post_speech(speech_body(text, normalize_text))
    if not is_unicode(text):
        assert "surrogate" in check_refusal(response)
    elif alphanumerics(text):
        check_audio(response)
    elif not normalize_text:
        message = check_refusal(response)
        assert "nothing to speak" in message or "empty" in message
    elif response.status_code != 200:  # normalised, symbols alone may be read as words, or be nothing to say
        check_refusal(response)
    else:
        check_audio(response)


@pytest.mark.parametrize(
    "name", ["lone surrogate", "only emoji", "only punctuation", "only controls", "combining marks only"]
)
@pytest.mark.parametrize("normalize_text", [True, False])
def test_text_that_cannot_be_spoken_is_refused_with_the_reason(post_speech, name: str, normalize_text: bool):
    message = check_refusal(post_speech(speech_body(NASTY[name], normalize_text)))
    reason = "surrogate" if name == "lone surrogate" else "nothing to speak"
    assert reason in message
    check_audio(post_speech(speech_body("Still speaking after that.", normalize_text)))


def test_a_surrogate_pair_sent_as_escapes_is_one_character(post_speech):
    assert speech_body("Grinning 😀 face.", True).count(b"\\ud83d\\ude00") == 1
    check_audio(post_speech(speech_body("Grinning 😀 face.", True)))
