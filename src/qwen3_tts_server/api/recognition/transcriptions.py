"""POST /v1/audio/transcriptions, OpenAI's contract: a recording in, its transcript out as json, text,
verbose_json (a segment for each part of a long recording, `words` with `timestamp_granularities[]=word`), srt or
vtt (cues from the words' times), or streamed as server-sent events (`transcript.text.delta` as the text is
decoded, then `transcript.text.done`), with `usage` in every answer. Word times come from the ForcedAligner hosted
beside the transcriber; without one, what needs them is a 400.

OpenAI's newer fields: `languages[]` (one forced, several allowed: `allowed_languages`), `keywords[]` (the
model's context, after `prompt`), and `languages` in json answers and the done event, the codes of the languages
heard. Speaker diarization (`diarized_json`, `known_speaker_names[]`, `known_speaker_references[]`) is a 400 naming
the field: Qwen3-ASR does not tell speakers apart.

The earlier ASR server's routes and fields, as it meant them: `language=auto` identifies the language, json
answers carry `language`, `return_timestamps` adds the words' times (`timestamps`, as the official package names
their fields), `POST /v1/audio/transcriptions/stream` and `POST /v1/audio/subtitles` (a request their schema
refuses is a 422 there, as it was)."""

from __future__ import annotations

import json
import math
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Form, UploadFile
from fastapi.responses import PlainTextResponse, Response, StreamingResponse

from ...engine.registry import HostedModel
from ...errors import InvalidInputError, TTSError, error_body, error_response_body, shown
from ...model.asr.aligner import TimedWord
from ...model.asr.languages import language_code
from ...service.recognition.routing import route_recognizer
from ...service.recognition.subtitles import CueRules, length_timed_words, subtitle_cues, to_srt, to_webvtt
from ...service.recognition.transcription import (
    NO_ALIGNER,
    TextDelta,
    TokenLogprob,
    Transcript,
    TranscriptionRequest,
    TranscriptSegment,
)
from ..dependencies import ServicesDep
from ..errors import EarlierServerRoute
from ..schemas import answers
from ..uploads import read_upload

router = APIRouter()
earlier_router = APIRouter(route_class=EarlierServerRoute)  # the earlier ASR server's own routes
RESPONSE_FORMATS = ("json", "text", "verbose_json", "srt", "vtt")
NO_DIARIZATION = "speaker diarization is not offered: Qwen3-ASR does not tell speakers apart"
STREAM_HEADERS = {"X-Accel-Buffering": "no", "Cache-Control": "no-cache"}
SUBTITLE_MODES = ("accurate", "fast")


@router.post(
    "/v1/audio/transcriptions",
    response_class=Response,
    responses=answers(
        "The transcript: JSON (`json`, `verbose_json`), text (`text`, `srt`, `vtt`), or server-sent events with "
        "`stream`",
        "application/json",
        "text/plain",
        "text/event-stream",
    ),
)
async def create_transcription(
    services: ServicesDep,
    file: Annotated[UploadFile, Form()],
    model: Annotated[str | None, Form()] = None,
    language: Annotated[str | None, Form()] = None,
    prompt: Annotated[str, Form()] = "",
    response_format: Annotated[str, Form()] = "json",
    temperature: Annotated[float, Form()] = 0.0,
    stream: Annotated[bool, Form()] = False,
    timestamp_granularities: Annotated[list[str] | None, Form(alias="timestamp_granularities[]")] = None,
    include: Annotated[list[str] | None, Form(alias="include[]")] = None,
    chunking_strategy: Annotated[str | None, Form()] = None,  # accepted: long audio is cut as the model's own
    return_timestamps: Annotated[bool, Form()] = False,  # the earlier ASR server's word timestamps
    languages: Annotated[list[str] | None, Form(alias="languages[]")] = None,
    keywords: Annotated[list[str] | None, Form(alias="keywords[]")] = None,
    known_speaker_names: Annotated[list[str] | None, Form(alias="known_speaker_names[]")] = None,
    known_speaker_references: Annotated[list[str] | None, Form(alias="known_speaker_references[]")] = None,
) -> Response:
    granularities = timestamp_granularities or []
    speakers = {"known_speaker_names": known_speaker_names, "known_speaker_references": known_speaker_references}
    for param, given in speakers.items():
        if given:
            raise InvalidInputError(f"{param}: {NO_DIARIZATION}", param=param)
    check_options(response_format, temperature, granularities, include or [], stream)
    hosted = route_recognizer(services.registry, model)
    if "word" in granularities:
        _need_aligner(hosted, "timestamp_granularities")
    if response_format in ("srt", "vtt"):
        _need_aligner(hosted, "response_format", f"response_format {response_format}")
    if return_timestamps:
        _need_aligner(hosted, "return_timestamps")
    timestamps = "word" in granularities or response_format in ("srt", "vtt") or return_timestamps
    audio = await read_upload(file, "file", services.settings.max_transcription_bytes)
    wants_logprobs = "logprobs" in (include or [])
    request = TranscriptionRequest(
        audio,
        language,
        with_keywords(prompt, keywords or []),
        languages=tuple(languages or ()),
        timestamps=timestamps,
        temperature=temperature,
        logprobs=wants_logprobs,
    )
    events = services.recognition[hosted.id].stream(request)
    first = await anext(events)  # bad audio or settings are refused here, with their status
    if stream:
        return StreamingResponse(
            _sse(first, events, wants_logprobs), media_type="text/event-stream", headers=STREAM_HEADERS
        )
    transcript = first
    try:
        async for event in events:
            transcript = event
    finally:
        await events.aclose()  # a client that left cancels the parts still decoding
    assert isinstance(transcript, Transcript)
    headers = cut_header(transcript)
    if response_format == "text":
        return PlainTextResponse(transcript.text + "\n", headers=headers)
    if response_format in ("srt", "vtt"):
        cues = subtitle_cues(transcript.text, transcript.words, cue_rules(services), transcript.seconds)
        return PlainTextResponse(to_srt(cues) if response_format == "srt" else to_webvtt(cues), headers=headers)
    if response_format == "verbose_json":
        body = _verbose(transcript, granularities)
    else:
        # `language` beside OpenAI's keys: the earlier ASR server's clients read it (the official name, "" for none).
        body = {
            "text": transcript.text,
            "language": transcript.language,
            "languages": languages_heard(transcript),
            "usage": usage_of(transcript),
        }
        if return_timestamps:
            body["timestamps"] = _official_items(transcript.words)
    if wants_logprobs:
        body["logprobs"] = logprobs_of(transcript.logprobs)
    return Response(json.dumps(body, ensure_ascii=False), media_type="application/json", headers=headers)


@earlier_router.post(
    "/v1/audio/transcriptions/stream",
    response_class=Response,
    responses=answers('An event for each part of the recording, then `{"done": true}`', "text/event-stream"),
)
async def earlier_transcription_stream(
    services: ServicesDep,
    file: Annotated[UploadFile, Form()],
    language: Annotated[str | None, Form()] = None,
    return_timestamps: Annotated[bool, Form()] = False,
) -> StreamingResponse:
    """The earlier ASR server's stream: an event for each part of the recording as it is transcribed,
    `{text, language, is_final}` (with `chunk_index` when there are several parts: its 5 s chunks with their
    words twice at every seam are not reproduced), then `{"done": true}`; an error after the start is an event."""
    hosted = route_recognizer(services.registry, None)
    if return_timestamps:
        _need_aligner(hosted, "return_timestamps")
    audio = await read_upload(file, "file", services.settings.max_transcription_bytes)
    events = services.recognition[hosted.id].stream(TranscriptionRequest(audio, language, timestamps=return_timestamps))
    first = await anext(events)  # bad audio or settings are refused here, with their status
    return StreamingResponse(
        _earlier_events(first, events, return_timestamps), media_type="text/event-stream", headers=STREAM_HEADERS
    )


@earlier_router.post(
    "/v1/audio/subtitles",
    response_class=Response,
    responses=answers("The subtitles, SubRip or WebVTT", "text/plain"),
)
async def earlier_subtitles(
    services: ServicesDep,
    file: Annotated[UploadFile, Form()],
    language: Annotated[str | None, Form()] = None,
    mode: Annotated[str, Form()] = "accurate",
    max_line_chars: Annotated[int, Form(ge=10, le=200)] = 42,
    model: Annotated[str | None, Form()] = None,
) -> Response:
    """The earlier ASR server's subtitles: a SubRip file as an attachment, its words timed by the aligner
    (`mode=accurate`) or by their length over each part (`fast`), cues of two lines of `max_line_chars` at most
    under the SUBTITLE_* settings. Its mistakes are not kept: the words are found (it found none with the
    official package), cues keep the transcript's punctuation, and lines of Chinese and Japanese are broken too."""
    if mode not in SUBTITLE_MODES:
        raise InvalidInputError(f"mode is accurate (the aligner's times) or fast, not {shown(mode)}", param="mode")
    hosted = route_recognizer(services.registry, model)
    if mode == "accurate":
        _need_aligner(hosted, "mode", "mode accurate", " (or ask for mode fast, the words timed by their length)")
    audio = await read_upload(file, "file", services.settings.max_transcription_bytes)
    request = TranscriptionRequest(audio, language, timestamps=mode == "accurate")
    transcript = await services.recognition[hosted.id].transcribe(request)
    words = length_timed_words(transcript) if mode == "fast" else transcript.words
    rules = cue_rules(services, line_characters=max_line_chars)
    return PlainTextResponse(
        to_srt(subtitle_cues(transcript.text, words, rules, transcript.seconds)),
        headers={"Content-Disposition": 'attachment; filename="subtitles.srt"'} | cut_header(transcript),
    )


def cue_rules(services: ServicesDep, line_characters: int = CueRules.line_characters) -> CueRules:
    settings = services.settings
    return CueRules(
        max_seconds=settings.subtitle_max_duration,
        line_characters=line_characters,
        pause_seconds=settings.subtitle_pause_threshold,
        min_seconds=settings.subtitle_min_duration,
        min_gap=settings.subtitle_min_gap,
    )


def _need_aligner(hosted: HostedModel, param: str, what: str | None = None, hint: str = "") -> None:
    if hosted.aligner is None:
        raise InvalidInputError(f"{what or param}: {NO_ALIGNER}{hint}", param=param)


def _official_items(words: list[TimedWord]) -> list[dict]:
    """Words with their times as the official package's items name them."""
    return [{"text": word.text, "start_time": word.start, "end_time": word.end} for word in words]


async def _earlier_events(first: Event, events: AsyncGenerator[Event, None], timestamps: bool) -> AsyncIterator[bytes]:
    def chunk(segment: TranscriptSegment, index: int, final: bool, several: bool) -> bytes:
        data: dict = {"text": segment.text, "language": segment.language, "is_final": final}
        data |= {"chunk_index": index} if several else {}
        return _earlier_event(data | ({"timestamps": _official_items(list(segment.words))} if timestamps else {}))

    held: list[TranscriptSegment] = []  # the latest part, sent once it is known whether it is the last
    try:
        async for event in _every(first, events):
            if isinstance(event, TranscriptSegment):
                if held:
                    yield chunk(held[-1], len(held) - 1, False, True)
                held.append(event)
            elif isinstance(event, Transcript):
                yield chunk(held[-1], len(held) - 1, True, len(held) > 1)
                yield _earlier_event({"done": True})
    except TTSError as exc:  # after the status was sent: the error is the stream's last event, without `done`
        yield _earlier_event(error_response_body(exc))
    finally:
        await events.aclose()


def _earlier_event(data: dict) -> bytes:
    return f"data: {json.dumps(data)}\n\n".encode()  # its escapes: json.dumps' defaults


def with_keywords(prompt: str, keywords: list[str]) -> str:
    """The model's context: the prompt, then the keywords (names, terms) on a line of their own, comma-separated."""
    words = ", ".join(word.strip() for word in keywords if word.strip())
    return f"{prompt}\n{words}" if prompt and words else prompt or words


def languages_heard(transcript: Transcript) -> list[dict]:
    """OpenAI's `languages`: the codes of the languages heard, in order (none when none was)."""
    codes = (language_code(name) for name in transcript.language.split(",") if name)
    return [{"code": code} for code in dict.fromkeys(codes) if code]


def check_options(
    response_format: str, temperature: float, granularities: list[str], include: list[str], stream: bool
) -> None:
    if response_format == "diarized_json":
        raise InvalidInputError(f"response_format diarized_json: {NO_DIARIZATION}", param="response_format")
    if response_format not in RESPONSE_FORMATS:
        raise InvalidInputError(
            f"response_format must be one of {', '.join(RESPONSE_FORMATS)}, not {shown(response_format)}",
            param="response_format",
        )
    unknown = [value for value in granularities if value not in ("word", "segment")]
    if unknown:
        raise InvalidInputError(
            f"timestamp_granularities takes word and segment, not {', '.join(map(repr, unknown))}",
            param="timestamp_granularities",
        )
    if granularities and response_format != "verbose_json":
        raise InvalidInputError("timestamp_granularities needs response_format verbose_json", param="response_format")
    if not 0.0 <= temperature <= 1.0:
        raise InvalidInputError("temperature is between 0 and 1", param="temperature")
    unknown = [value for value in include if value != "logprobs"]
    if unknown:
        raise InvalidInputError(f"include takes logprobs, not {', '.join(map(repr, unknown))}", param="include")
    if include and response_format not in ("json", "verbose_json"):
        raise InvalidInputError("include logprobs needs response_format json or verbose_json", param="include")
    if stream and response_format not in ("json", "text"):
        raise InvalidInputError("stream takes response_format json or text", param="stream")


def cut_header(transcript: Transcript) -> dict[str, str]:
    """X-Parts-Cut: the parts (from 1) that spent their token budget (MAX_TRANSCRIPTION_TOKENS) before the model
    ended them, so their text may be cut."""
    return {"X-Parts-Cut": ",".join(map(str, transcript.cut_parts))} if transcript.cut_parts else {}


def usage_of(transcript: Transcript) -> dict:
    return {"type": "duration", "seconds": math.ceil(transcript.seconds)}


def _verbose(transcript: Transcript, granularities: list[str]) -> dict:
    """OpenAI's verbose_json: segments unless only words are asked for, words when they are."""
    body: dict = {
        "task": "transcribe",
        "language": transcript.language.lower(),
        "duration": round(transcript.seconds, 3),
        "text": transcript.text,
    }
    if "word" in granularities:
        body["words"] = [{"word": word.text, "start": word.start, "end": word.end} for word in transcript.words]
    if set(granularities) == {"word"}:
        return body | {"usage": usage_of(transcript)}
    return body | {
        "segments": [
            {
                "id": index,
                "seek": round(segment.start * 100),  # in 10 ms frames, as Whisper counts
                "start": segment.start,
                "end": segment.end,
                "text": segment.text,
                "tokens": list(segment.tokens),
                "temperature": 0.0,
            }
            for index, segment in enumerate(transcript.segments)
        ],
        "usage": usage_of(transcript),
    }


Event = TextDelta | TranscriptSegment | Transcript


async def _every(first: Event, events: AsyncGenerator[Event, None]) -> AsyncIterator[Event]:
    yield first
    async for event in events:
        yield event


def logprobs_of(logprobs: tuple[TokenLogprob, ...]) -> list[dict]:
    return [{"token": item.token, "logprob": item.logprob, "bytes": list(item.bytes)} for item in logprobs]


async def _sse(first: Event, events: AsyncGenerator[Event, None], logprobs: bool) -> AsyncIterator[bytes]:
    try:
        async for event in _every(first, events):
            if isinstance(event, TextDelta):
                delta = {"type": "transcript.text.delta", "delta": event.text}
                yield _event(delta | {"logprobs": logprobs_of(event.logprobs)} if logprobs else delta)
            elif isinstance(event, Transcript):
                done = {
                    "type": "transcript.text.done",
                    "text": event.text,
                    "languages": languages_heard(event),
                    "usage": usage_of(event),
                }
                yield _event(done | {"logprobs": logprobs_of(event.logprobs)} if logprobs else done)
    except TTSError as exc:  # after the status was sent: the error is the stream's last event
        yield _event({"type": "error", "error": error_body(exc)})
    finally:
        await events.aclose()


def _event(data: dict) -> bytes:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()
