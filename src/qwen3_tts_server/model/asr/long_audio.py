"""Long audio cut into parts the model takes one at a time, where the official package cuts it
(docs/asr_reference.md, section j): each cut at the quietest point within 5 s of the longest part's end, found
with a 100 ms window of summed magnitudes; parts shorter than 0.5 s padded with silence (a whole clip never is)."""

from __future__ import annotations

import numpy as np

MAX_SECONDS = 1200.0  # the longest part transcribed
MAX_SECONDS_WITH_TIMESTAMPS = 180.0  # the longest part the aligner times
MIN_SECONDS = 0.5  # a shorter part is padded with silence to this
SEARCH_SECONDS = 5.0  # a cut is looked for this far either side of the longest part's end
WINDOW_SECONDS = 0.1


def split_long_audio(wave: np.ndarray, rate: int, max_seconds: float = MAX_SECONDS) -> list[tuple[np.ndarray, float]]:
    """(part, its offset in seconds) for a mono clip: the clip itself when it is no longer than `max_seconds`."""
    wave = np.asarray(wave, dtype=np.float32)
    total = len(wave)
    if total / rate <= max_seconds:
        return [(wave, 0.0)]
    longest, reach = int(max_seconds * rate), int(SEARCH_SECONDS * rate)
    window = max(4, int(WINDOW_SECONDS * rate))
    parts, start, offset = [], 0, 0.0
    while total - start > longest:
        end = start + longest
        low, high = max(start, end - reach), min(total, end + reach)
        if high - low > window:
            magnitude = np.abs(wave[low:high])
            # float32 sums, as the official code takes them: its argmin is the one to match
            quietest = int(np.argmin(np.convolve(magnitude, np.ones(window, dtype=np.float32), mode="valid")))
            end = low + quietest + int(np.argmin(magnitude[quietest : quietest + window]))
        end = min(max(end, start + 1), total)
        parts.append((wave[start:end], offset))
        offset += (end - start) / float(rate)  # summed part by part, as the official offsets are
        start = end
    parts.append((wave[start:], offset))
    shortest = int(MIN_SECONDS * rate)
    return [(np.pad(part, (0, max(0, shortest - len(part)))), at) for part, at in parts]
