"""WAV that every reader reads: a whole file (the default for WAV, or `stream: false`; what the cache stores and
replays to such a request) has exact RIFF and data sizes, a streamed one (`stream: true`, and its replays) says
0xFFFFFFFF (unknown) and still reads back, and no WAV carries a LIST/INFO chunk. Durations are read back with
Python's `wave`, soundfile (libsndfile) and PyAV (FFmpeg, as ffprobe reports them) and compared with the samples in
the data chunk and the frames in the response headers."""

from __future__ import annotations

import io
import json
import re
import struct
import wave
from pathlib import Path

import av
import numpy as np
import pytest
import soundfile

from in_process import make_app, run_in_app
from qwen3_tts_server.audio.encoding import StreamEncoder, audio_format, wav_with_sizes, whole_file

UNKNOWN = 0xFFFFFFFF
FRAMES = 7  # the frame budget: the seeded requests below run to it (random weights rarely end speech sooner)
RATE = 24000  # the test model's
SAMPLES_PER_FRAME = 1920  # 80 ms at 24 kHz


def chunks(wav: bytes) -> list[tuple[bytes, int, int]]:
    """(id, size as written, offset of its payload) for each chunk after the RIFF/WAVE header; a data chunk of
    unknown size runs to the end of the file."""
    assert wav[:4] == b"RIFF" and wav[8:12] == b"WAVE"
    found, offset = [], 12
    while offset + 8 <= len(wav):
        chunk_id, size = wav[offset : offset + 4], struct.unpack_from("<I", wav, offset + 4)[0]
        found.append((chunk_id, size, offset + 8))
        if size == UNKNOWN:
            break
        offset += 8 + size + size % 2
    return found


def riff_size(wav: bytes) -> int:
    return struct.unpack_from("<I", wav, 4)[0]


def data_chunk(wav: bytes) -> tuple[int, int]:
    """(size as written, offset of the samples); the only chunks are `fmt ` and `data`, in that order."""
    found = chunks(wav)
    assert [chunk_id for chunk_id, _, _ in found] == [b"fmt ", b"data"], "no LIST/INFO or other chunk"
    _, size, offset = found[1]
    return size, offset


def samples_in(wav: bytes) -> int:
    """The samples the data chunk holds: the bytes after its header, 16-bit mono."""
    return (len(wav) - data_chunk(wav)[1]) // 2


def read_with_wave(wav: bytes) -> tuple[int, int]:
    with wave.open(io.BytesIO(wav)) as reader:
        return reader.getnframes(), reader.getframerate()


def read_with_soundfile(wav: bytes) -> tuple[int, int, int]:
    """(frames in the header as libsndfile reads it, frames it decodes, sample rate)."""
    info = soundfile.info(io.BytesIO(wav))
    audio, rate = soundfile.read(io.BytesIO(wav), dtype="int16")
    return info.frames, len(audio), rate


def read_with_pyav(wav: bytes) -> tuple[float, int, int]:
    """(the stream's duration in seconds as ffprobe reports it, samples decoded, sample rate)."""
    with av.open(io.BytesIO(wav)) as container:
        stream = container.streams.audio[0]
        seconds = float(stream.duration * stream.time_base)
        decoded = sum(frame.samples for frame in container.decode(stream))
        return seconds, decoded, stream.sample_rate


def assert_exact_whole_file(wav: bytes, header_frames: int) -> None:
    size, offset = data_chunk(wav)
    assert riff_size(wav) == len(wav) - 8
    assert size == len(wav) - offset
    samples = samples_in(wav)
    assert samples == header_frames * SAMPLES_PER_FRAME
    assert read_with_wave(wav) == (samples, RATE)
    assert read_with_soundfile(wav) == (samples, samples, RATE)
    assert read_with_pyav(wav) == (samples / RATE, samples, RATE)


def streamed_wav(seconds: float = 0.5) -> bytes:
    fmt, rate = audio_format("wav", None, RATE)
    encoder = StreamEncoder(fmt, rate, RATE)
    audio = (0.3 * np.sin(np.arange(int(seconds * RATE)) * 0.05)).astype(np.float32)
    return b"".join([encoder.write(audio[i : i + 1920]) for i in range(0, len(audio), 1920)] + [encoder.close()])


# --- the function that writes the sizes -------------------------------------------------------------------


def test_wav_with_sizes_writes_the_exact_sizes_and_keeps_every_sample():
    streamed = streamed_wav()
    assert riff_size(streamed) == UNKNOWN and data_chunk(streamed)[0] == UNKNOWN
    whole = wav_with_sizes(streamed)
    assert len(whole) == len(streamed)
    assert riff_size(whole) == len(whole) - 8 and data_chunk(whole)[0] == len(whole) - data_chunk(whole)[1]
    assert whole[data_chunk(whole)[1] :] == streamed[data_chunk(streamed)[1] :]
    assert read_with_wave(whole) == (RATE // 2, RATE)
    assert wav_with_sizes(whole) == whole


def test_wav_with_sizes_steps_over_other_chunks_and_their_pad_byte():
    fmt = struct.pack("<HHIIHH", 1, 1, RATE, 2 * RATE, 2, 16)
    samples = np.arange(-50, 50, dtype="<i2").tobytes()
    odd = b"odd!" + struct.pack("<I", 3) + b"abc\x00"  # 3 bytes and a pad byte
    streamed = b"".join(
        [b"RIFF", struct.pack("<I", UNKNOWN), b"WAVEfmt ", struct.pack("<I", 16), fmt, odd]
        + [b"data", struct.pack("<I", UNKNOWN), samples]
    )
    whole = wav_with_sizes(streamed)
    assert riff_size(whole) == len(whole) - 8
    assert struct.unpack_from("<I", whole, len(whole) - len(samples) - 4)[0] == len(samples)
    with wave.open(io.BytesIO(whole)) as reader:
        assert reader.getnframes() == 100 and reader.readframes(100) == samples


@pytest.mark.parametrize("data", [b"", b"OggS" + bytes(40), b"RIFF\xff\xff\xff\xffWAVEfmt \x10\x00\x00\x00"])
def test_wav_with_sizes_refuses_what_is_not_a_complete_wav(data):
    with pytest.raises(ValueError):
        wav_with_sizes(data)


def test_whole_file_touches_only_wav_and_flac():
    ogg = b"OggS" + bytes(60)
    assert whole_file(audio_format("opus", None, RATE)[0], ogg, 100) is ogg
    wav = streamed_wav()
    assert whole_file(audio_format("wav", None, RATE)[0], wav, 100) == wav_with_sizes(wav)


def test_a_whole_flac_knows_its_length():
    fmt, rate = audio_format("flac", None, RATE)
    encoder = StreamEncoder(fmt, rate, RATE)
    samples = np.sin(np.arange(RATE // 2) / 7).astype(np.float32) * 0.3
    streamed = encoder.write(samples) + encoder.close()
    assert soundfile.info(io.BytesIO(streamed)).frames != len(samples)  # the streamed header does not know it
    whole = encoder.as_file(streamed)
    assert soundfile.info(io.BytesIO(whole)).frames == len(samples) == len(soundfile.read(io.BytesIO(whole))[0])


def test_the_encoder_writes_no_list_chunk():
    wav = streamed_wav()
    assert b"LIST" not in wav and b"Lavf" not in wav
    data_chunk(wav)


# --- through the API -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def responses(models, tmp_path_factory) -> dict[str, tuple[dict, bytes]]:
    """name -> (headers, body) for WAV requests made in order against one app with an output cache."""
    app = make_app(
        models["custom_voice"],
        model_id="tiny-custom-voice",
        data_dir=tmp_path_factory.mktemp("data"),
        audio_cache_max=16,
        max_request_frames=FRAMES,
    )
    wav = {"model": "tts-1", "voice": "nova", "response_format": "wav"}  # vivian: made to the frame budget
    requests = {
        "whole_miss": {**wav, "input": "A whole file.", "seed": 5},  # WAV is whole unless asked to stream
        "whole_hit": {**wav, "input": "A whole file.", "seed": 5, "stream": False},
        "streamed_hit": {**wav, "input": "A whole file.", "seed": 5, "stream": True},
        "streamed_miss": {**wav, "input": "Streamed first.", "seed": 6, "stream": True},
        "whole_hit_of_streamed": {**wav, "input": "Streamed first.", "seed": 6},
    }

    async def scenario(_, http):
        out = {}
        for name, body in requests.items():
            response = await http.post("/v1/audio/speech", json=body)
            assert response.status_code == 200, response.text
            out[name] = (response.headers, response.content)
        return out

    return run_in_app(app, scenario)


@pytest.mark.parametrize("name", ["whole_miss", "whole_hit", "whole_hit_of_streamed"])
def test_whole_file_wav_has_exact_sizes_every_reader_agrees_on(responses, name):
    headers, wav = responses[name]
    assert headers["x-cache"] == ("miss" if name == "whole_miss" else "hit")
    assert int(headers["content-length"]) == len(wav)
    assert int(headers["x-audio-frames"]) == FRAMES
    assert_exact_whole_file(wav, FRAMES)


def test_a_cache_hit_replays_the_bytes_of_the_answer_it_replays(responses):
    assert responses["whole_hit"][1] == responses["whole_miss"][1]
    streamed = responses["streamed_hit"][1]  # the stored file as a stream sends it: its sizes unknown
    assert riff_size(streamed) == UNKNOWN and wav_with_sizes(streamed) == responses["whole_miss"][1]


def test_streamed_wav_says_unknown_sizes_and_still_reads_back(responses):
    headers, wav = responses["streamed_miss"]
    assert headers["x-cache"] == "miss" and "content-length" not in headers
    size, offset = data_chunk(wav)
    assert riff_size(wav) == UNKNOWN and size == UNKNOWN
    samples = samples_in(wav)
    assert samples == FRAMES * SAMPLES_PER_FRAME
    assert read_with_soundfile(wav) == (samples, samples, RATE)
    assert read_with_pyav(wav) == (samples / RATE, samples, RATE)
    # the cache stored it whole: the same samples, now with their sizes
    whole = responses["whole_hit_of_streamed"][1]
    assert whole == wav_with_sizes(wav) and whole[offset:] == wav[offset:]


def test_the_readmes_curl_example_writes_a_wav_that_wave_reads(models, tmp_path):
    """README.md's first curl example, sent as it stands, gives a WAV whose header Python's `wave` gets right."""
    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    command = re.search(r"curl -s localhost:8000(\S+) .*?-d '(\{.*?\})' -o (\S+)", readme, re.DOTALL)
    assert command is not None and command.group(3).endswith(".wav"), "the README's first curl example moved"
    path, body = command.group(1), json.loads(command.group(2))
    app = make_app(models["custom_voice"], data_dir=tmp_path, max_request_frames=FRAMES)

    async def scenario(_, http):
        return await http.post(path, json=body)

    response = run_in_app(app, scenario)
    assert response.status_code == 200
    # The body sets no seed, so the sampled speech may end before the frame budget: the count is the server's.
    frames = int(response.headers["x-audio-frames"])
    assert 0 < frames <= FRAMES
    with wave.open(io.BytesIO(response.content)) as reader:
        assert reader.getframerate() == RATE and reader.getnframes() == frames * SAMPLES_PER_FRAME
        assert len(reader.readframes(reader.getnframes())) == 2 * frames * SAMPLES_PER_FRAME
    assert_exact_whole_file(response.content, frames)
