"""The client's words timed by the words as spoken (service/speech/word_times.py): normalised runs share their
spoken run's time, unspoken words take none, ElevenLabs-style character times cover the text, and Cartesia-style
words as written keep their marks."""

from __future__ import annotations

from qwen3_tts_server.model.asr.aligner import TimedWord
from qwen3_tts_server.service.speech.word_times import character_times, clamped, client_word_times, written_words


def words(*triples) -> list[TimedWord]:
    return [TimedWord(*triple) for triple in triples]


def test_equal_words_take_their_spoken_times_in_the_clients_spelling():
    spoken = words(("hello", 0.1, 0.4), ("world", 0.5, 0.9))
    assert client_word_times(["Hello", "World"], spoken) == words(("Hello", 0.1, 0.4), ("World", 0.5, 0.9))


def test_a_normalised_run_shares_its_spoken_runs_time_by_length():
    spoken = words(("It", 0.0, 0.2), ("costs", 0.2, 0.6), ("five", 0.6, 0.9), ("dollars", 0.9, 1.4))
    timed = client_word_times(["It", "costs", "5"], spoken)
    assert timed == words(("It", 0.0, 0.2), ("costs", 0.2, 0.6), ("5", 0.6, 1.4))
    two = client_word_times(["ab", "abcd"], words(("x", 1.0, 1.3), ("y", 1.3, 1.6)))
    assert two == words(("ab", 1.0, 1.2), ("abcd", 1.2, 1.6))


def test_unspoken_words_keep_their_place_with_no_time_and_order_holds():
    spoken = words(("one", 0.0, 0.3), ("two", 0.4, 0.7))
    timed = client_word_times(["one", "zzz", "two", "qqq"], spoken)
    assert [w.text for w in timed] == ["one", "zzz", "two", "qqq"]
    assert timed[1] == TimedWord("zzz", 0.3, 0.3) and timed[3] == TimedWord("qqq", 0.7, 0.7)
    assert client_word_times(["a", "b"], []) == words(("a", 0.0, 0.0), ("b", 0.0, 0.0))


def test_times_are_kept_inside_the_segment_and_moved_by_its_offset_and_speed():
    timed = clamped(words(("a", -0.1, 0.5), ("b", 0.9, 1.7)), duration=1.2, offset=2.0, speed=2.0)
    assert timed == words(("a", 2.0, 2.25), ("b", 2.45, 2.6))


def test_character_times_cover_every_character_and_never_go_back():
    text = "Hi, don't go!"
    times = character_times(text, words(("Hi", 0.0, 0.2), ("don't", 0.3, 0.8), ("go", 0.9, 1.1)), 0.0, 1.5)
    assert "".join(times.chars) == text
    assert times.starts_ms == sorted(times.starts_ms)
    assert times.starts_ms[0] == 0 and times.starts_ms[text.index("d")] == 300
    assert times.starts_ms[text.index("g")] == 900
    ends = [start + duration for start, duration in zip(times.starts_ms, times.durations_ms, strict=True)]
    assert ends[-1] == 1500  # the marks after the last word run to the segment's end
    assert all(duration >= 0 for duration in times.durations_ms)
    assert times.durations_ms[text.index(",")] == 0


def test_words_as_written_keep_their_marks_and_take_the_times_of_the_words_in_them():
    spoken = words(("Hello", 0.1, 0.3), ("there", 0.3, 0.5), ("5", 0.6, 0.9), ("today", 0.9, 1.2))
    timed = written_words("Hello, there (it's $5) — today! ", spoken, 0.0)
    assert [w.text for w in timed] == ["Hello,", "there", "(it's", "$5)", "—", "today!"]
    assert [(w.start, w.end) for w in timed] == [(0.1, 0.3), (0.3, 0.5), (0.5, 0.5), (0.6, 0.9), (0.9, 0.9), (0.9, 1.2)]


def test_chinese_words_as_written_come_a_character_each_with_their_marks():
    spoken = words(("你", 0.0, 0.1), ("好", 0.1, 0.2), ("世", 0.3, 0.4), ("界", 0.4, 0.5))
    timed = written_words("你好，世界。", spoken, 0.0)
    assert [(w.text, w.start, w.end) for w in timed] == [
        ("你", 0.0, 0.1), ("好，", 0.1, 0.2), ("世", 0.3, 0.4), ("界。", 0.4, 0.5)
    ]  # fmt: skip
    assert written_words("", [], 0.0) == [] and written_words("ok", [], 2.0) == words(("ok", 2.0, 2.0))
