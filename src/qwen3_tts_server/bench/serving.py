"""`qwen3-tts-server bench-serving`: the server under open-loop load, through the HTTP path a client takes.

Per scheduling policy (a server started with its settings, or one already running) and per arrival rate, requests
arrive as a Poisson process for a fixed time, each sent whether or not the others have finished; then a burst
arrives at once. Every request streams raw PCM (POST /v1/audio/speech, `stream: true`), and the arrival time and
size of each chunk feed a simulated player that counts the underruns a listener would hear. Reported per level:
time to first audio (p50/p95/p99) and to last audio (p95), the share of requests with an underrun, errors by kind,
the rate achieved, the slowest stream's speed after its first audio; per policy, the highest rate held.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import httpx

from ..errors import TTSError
from .traffic import PCM_BYTES_PER_SAMPLE, refusal
from .workload import percentile

# The scheduling policies, as the server's settings: `before` is today's (at most two prefills join a step).
POLICIES = {
    "before": {"SCHEDULER": "fixed", "MAX_PREFILLS_PER_STEP": "2"},
    "after": {"SCHEDULER": "deadline"},
}
# Settings the servers inherit from the benchmark's environment that change their speed: recorded in the report.
SERVING_ENVIRONMENT = (
    "INFERENCE_CPU_CORES",
    "OMP_NUM_THREADS",
    "MAX_BATCH_SIZE",
    "MAX_QUEUE_DEPTH",
    "QUANTIZE",
    "CUDA_GRAPHS",
)
DEFAULT_VOICE = "vivian"  # a preset speaker of the CustomVoice checkpoints
SAMPLE_RATE = 24000  # raw PCM's rate: the model's (the speech route does not say it)
# A chunk is late (an underrun) when it arrives more than this after the held audio has played: one arriving exactly
# as it ends is not, and the float rounding of the summed chunk lengths (far below a nanosecond) never counts.
LATE_BY = 1e-9
TEXTS = (
    "The quarterly report is ready, and the numbers look better than we expected.",
    "Please remember to lock the back door before you leave the office tonight.",
    "Our flight to Lisbon was delayed by two hours because of fog over the runway.",
    "She planted tomatoes, basil and a row of sunflowers along the garden fence.",
    "If the printer jams again, open the side panel and pull the paper out gently.",
    "The museum opens at nine on weekdays and stays open late on Friday evenings.",
    "He finally fixed the squeaky bicycle chain with a few drops of oil.",
    "Turn left at the second traffic light, then follow the signs to the harbour.",
    "The recipe calls for three eggs, a cup of flour and a pinch of salt.",
    "We will review the design on Monday and ship the first version next month.",
    "A cold front is moving in from the north, bringing strong winds and light snow.",
    "Thank you for calling, your appointment is confirmed for Tuesday at half past ten.",
)


class Playback(NamedTuple):
    underruns: int
    stalled_seconds: float


def play(chunks: Iterable[tuple[float, float]]) -> Playback:
    """What a player makes of `chunks`, (arrival seconds, audio seconds) in arrival order: it starts at the first
    arrival and plays what it holds; a chunk arriving after all of that has played (by more than LATE_BY) is an
    underrun, stalled for the gap, and playback resumes at its arrival."""
    underruns, stalled, ends = 0, 0.0, None
    for arrival, seconds in chunks:
        if ends is None:
            ends = arrival
        elif arrival > ends + LATE_BY:
            underruns, stalled, ends = underruns + 1, stalled + arrival - ends, arrival
        ends += seconds
    return Playback(underruns, stalled)


def arrivals(rate: float, duration: float, seed: int) -> list[float]:
    """Poisson arrival times in [0, duration): exponential gaps at `rate` per second, seeded by (seed, rate)."""
    rng = random.Random(f"{seed}:{rate:g}")
    times, at = [], rng.expovariate(rate)
    while at < duration:
        times.append(at)
        at += rng.expovariate(rate)
    return times


@dataclass
class Request:
    """One streamed request. `sent` counts from its level's start; the other times from its sending."""

    sent: float
    first_audio: float | None = None
    last_audio: float | None = None
    audio_seconds: float = 0.0
    underruns: int = 0
    stalled_seconds: float = 0.0
    error: str | None = None
    chunks: list[tuple[float, int]] = field(default_factory=list)  # (arrival, bytes) of each chunk as received

    def finish(self, sample_rate: int) -> None:
        """Its first and last audio, audio seconds and what a player heard, from its chunks."""
        if self.chunks:
            self.first_audio, self.last_audio = self.chunks[0][0], self.chunks[-1][0]
        per_byte = 1 / (PCM_BYTES_PER_SAMPLE * sample_rate)
        self.audio_seconds = sum(size for _, size in self.chunks) * per_byte
        self.underruns, self.stalled_seconds = play((at, size * per_byte) for at, size in self.chunks)


@dataclass
class Level:
    """The figures of one level: `kind` rate (Poisson arrivals at `load` per second) or burst (`load` at once)."""

    policy: str
    kind: str
    load: float
    requests: int
    errors: dict[str, int]
    first_audio_p50_ms: float | None
    first_audio_p95_ms: float | None
    first_audio_p99_ms: float | None
    last_audio_p95_s: float | None
    underrun_share: float | None  # of the requests answered without error, as are the underruns and stalls
    underruns: int
    stalled_seconds: float
    achieved_rate: float  # requests answered without error per second of the level (arrivals, then the last byte)
    slowest_stream_rtf: float | None  # min of audio seconds / (last - first audio): x real time after first audio
    wall_seconds: float

    @property
    def name(self) -> str:
        return level_name(self.kind, self.load)


def level_name(kind: str, load: float) -> str:
    return f"{load:g}/s" if kind == "rate" else f"burst {load:g}"


def summarize(policy: str, kind: str, load: float, requests: list[Request], wall: float) -> Level:
    answered = [r for r in requests if r.error is None]
    first = [r.first_audio for r in answered if r.first_audio is not None]
    last = [r.last_audio for r in answered if r.last_audio is not None]
    speeds = [
        r.audio_seconds / (r.last_audio - r.first_audio)
        for r in answered
        if r.first_audio is not None and r.last_audio is not None and r.last_audio > r.first_audio
    ]

    def ms(share: float) -> float | None:
        return round(1000 * percentile(first, share), 1) if first else None

    return Level(
        policy=policy,
        kind=kind,
        load=load,
        requests=len(requests),
        errors=dict(Counter(r.error for r in requests if r.error is not None)),
        first_audio_p50_ms=ms(0.5),
        first_audio_p95_ms=ms(0.95),
        first_audio_p99_ms=ms(0.99),
        last_audio_p95_s=round(percentile(last, 0.95), 3) if last else None,
        underrun_share=round(sum(r.underruns > 0 for r in answered) / len(answered), 3) if answered else None,
        underruns=sum(r.underruns for r in answered),
        stalled_seconds=round(sum(r.stalled_seconds for r in answered), 3),
        achieved_rate=round(len(answered) / wall, 3),
        slowest_stream_rtf=round(min(speeds), 3) if speeds else None,
        wall_seconds=round(wall, 2),
    )


def highest_rate_held(levels: Iterable[Level], ttfa_goal_ms: float) -> float | None:
    """The largest arrival rate with p95 first audio within the goal, no underrun and no error."""
    held = [
        level.load
        for level in levels
        if level.kind == "rate"
        and level.first_audio_p95_ms is not None
        and level.first_audio_p95_ms <= ttfa_goal_ms
        and level.underruns == 0
        and not level.errors
    ]
    return max(held, default=None)


@dataclass(frozen=True)
class Plan:
    """What a policy's server is sent: each rate for `duration` seconds, then `burst` requests at once (0: none),
    `burst_rounds` times, each round once the one before has ended (their requests summarised together)."""

    rates: tuple[float, ...]
    duration: float
    burst: int
    seed: int = 0
    sample_rate: int = SAMPLE_RATE
    timeout: float = 120.0  # seconds a request may take
    burst_rounds: int = 1
    language: str | None = None  # None: the server detects it (Auto)


class Schedule(NamedTuple):
    """A level's arrivals: `offsets` seconds from its start, spread over `window` seconds, `rounds` times."""

    kind: str
    load: float
    offsets: list[float]
    window: float
    rounds: int = 1


@dataclass
class LevelRun:
    level: Level
    requests: list[Request]


@dataclass
class PolicyRun:
    policy: str
    server: dict[str, Any]  # what its /health says of its model and engine
    runs: list[LevelRun]


async def run_policy(
    base: str, policy: str, plan: Plan, on_level: Callable[[Level], None] = lambda level: None
) -> PolicyRun:
    """The plan against the server at `base` (after one warm-up request), `on_level` told of each level's figures."""
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=64)  # never a client-side queue
    async with httpx.AsyncClient(base_url=base, timeout=plan.timeout, limits=limits) as client:
        voice = await preset_voice(client)
        warm_up = await stream_speech(client, _body(voice, plan, "warm-up", 0), time.monotonic(), plan)
        if warm_up.error is not None:
            raise TTSError(f"{policy}: the warm-up request failed: {warm_up.error}")
        server = await server_info(client)
        levels = [
            Schedule("rate", rate, arrivals(rate, plan.duration, plan.seed), plan.duration) for rate in plan.rates
        ]
        levels += [Schedule("burst", plan.burst, [0.0] * plan.burst, 0.0, plan.burst_rounds)] if plan.burst else []
        runs = []
        for schedule in levels:
            runs.append(await _level(client, voice, plan, policy, schedule))
            on_level(runs[-1].level)
    return PolicyRun(policy, server, runs)


async def _level(client: httpx.AsyncClient, voice: str, plan: Plan, policy: str, schedule: Schedule) -> LevelRun:
    """Each request sent at its offset from the level's start, whatever the others are doing (open loop); the
    level lasts its arrival window or until its last byte, whichever is later."""
    kind, load, offsets, window, rounds = schedule
    requests: list[Request] = []
    wall = 0.0
    for round_ in range(rounds):
        start = time.monotonic()

        async def one(index: int, offset: float, start: float = start) -> Request:
            await asyncio.sleep(start + offset - time.monotonic())
            return await stream_speech(client, _body(voice, plan, f"{kind}:{load:g}", index), start, plan)

        first = round_ * len(offsets)
        requests += await asyncio.gather(*(one(first + i, offset) for i, offset in enumerate(offsets)))
        wall += max(window, time.monotonic() - start)
    return LevelRun(summarize(policy, kind, load, requests, wall), requests)


def _body(voice: str, plan: Plan, level: str, index: int) -> dict[str, Any]:
    """A request of TEXTS with a seed of its own (seeded by the plan's seed, level and index), never one the output
    cache holds; in the plan's language, if it names one."""
    rng = random.Random(f"{plan.seed}:{level}:{index}")
    text, request_seed = rng.choice(TEXTS), rng.randrange(1 << 31)
    body = {
        "model": "tts-1",
        "input": text,
        "voice": voice,
        "response_format": "pcm",
        "stream": True,
        "seed": request_seed,
    }
    return body | ({"language": plan.language} if plan.language else {})


async def stream_speech(client: httpx.AsyncClient, body: dict[str, Any], start: float, plan: Plan) -> Request:
    """One streamed request, its chunks timed as they arrive; never raises (a failure is the request's `error`)."""
    sent = time.monotonic()
    request = Request(sent - start)
    try:
        await asyncio.wait_for(_receive(client, body, request, sent), plan.timeout)
    except Exception as exc:  # what a client sees: a timeout, a reset, a protocol error
        request.error = request.error or type(exc).__name__
    request.finish(plan.sample_rate)
    return request


async def _receive(client: httpx.AsyncClient, body: dict[str, Any], request: Request, sent: float) -> None:
    async with client.stream("POST", "/v1/audio/speech", json=body) as response:
        request.error = await refusal(response)
        if request.error is not None:
            return
        async for data in response.aiter_bytes():
            if data:
                request.chunks.append((time.monotonic() - sent, len(data)))
    received = sum(size for _, size in request.chunks)
    if received == 0 or received % PCM_BYTES_PER_SAMPLE:
        request.error = "bad_audio"


async def preset_voice(client: httpx.AsyncClient) -> str:
    """DEFAULT_VOICE if the server has that preset speaker, else its first preset."""
    voices = (await client.get("/v1/audio/voices")).raise_for_status().json()["data"]
    presets = [voice["id"] for voice in voices if voice.get("type") == "preset"]
    if not presets:
        raise TTSError("the server has no preset speaker: bench-serving speaks with a CustomVoice model")
    return DEFAULT_VOICE if DEFAULT_VOICE in presets else presets[0]


async def server_info(client: httpx.AsyncClient) -> dict[str, Any]:
    """The server's model, device, dtype and engine limits, as /health reports them."""
    health = (await client.get("/health")).json()
    model = health.get("model") or {}
    keys = ("device", "dtype", "quantization")
    return {"model_id": health.get("model_id"), **{key: model.get(key) for key in keys}} | {
        key: health.get(key) for key in ("cuda_graphs", "max_batch_size", "max_queue_depth")
    }


def build_report(results: list[PolicyRun], meta: dict[str, Any], ttfa_goal_ms: float) -> dict[str, Any]:
    """The JSON report: the levels' figures, each policy's highest rate held and the before/after ratios of p95 first
    audio (when both ran)."""
    levels = [run.level for result in results for run in result.runs]
    return {
        "meta": {**meta, "ttfa_goal_ms": ttfa_goal_ms, "servers": {r.policy: r.server for r in results}},
        "levels": [asdict(level) for level in levels],
        "highest_rate_held": {
            r.policy: highest_rate_held((run.level for run in r.runs), ttfa_goal_ms) for r in results
        },
        "p95_first_audio_ratios": ratios(levels),
    }


def requests_report(results: list[PolicyRun]) -> dict[str, list[dict[str, Any]]]:
    """Every request's timings and chunks, by policy and level (`--requests`: to look into a level's figures)."""
    return {f"{r.policy} {run.level.name}": [asdict(q) for q in run.requests] for r in results for run in r.runs}


def ratios(levels: list[Level]) -> list[dict[str, Any]]:
    """Per level both policies ran: p95 first audio before, after, and before / after."""
    after = {(level.kind, level.load): level for level in levels if level.policy == "after"}
    rows = []
    for before in (level for level in levels if level.policy == "before"):
        other = after.get((before.kind, before.load))
        if other is None or before.first_audio_p95_ms is None or not other.first_audio_p95_ms:
            continue
        rows.append(
            {
                "level": before.name,
                "before_ms": before.first_audio_p95_ms,
                "after_ms": other.first_audio_p95_ms,
                "before_over_after": round(before.first_audio_p95_ms / other.first_audio_p95_ms, 2),
            }
        )
    return rows


def table(report: dict[str, Any]) -> str:
    """The report for a reader: a row per level, the highest rates held and the before/after ratios."""
    lines = [
        f"{'policy':<8}{'level':>10}{'n':>6}{'errors':>8}{'first audio p50/p95/p99 ms':>30}{'last p95 s':>12}"
        f"{'underrun share':>16}{'underruns':>11}{'done/s':>8}{'slowest x':>11}"
    ]
    for level in report["levels"]:
        first = "/".join(_shown(level[f"first_audio_p{p}_ms"], ".0f") for p in (50, 95, 99))
        name = level_name(level["kind"], level["load"])
        lines.append(
            f"{level['policy']:<8}{name:>10}{level['requests']:>6}{sum(level['errors'].values()):>8}{first:>30}"
            f"{_shown(level['last_audio_p95_s'], '.2f'):>12}{_shown(level['underrun_share'], '.0%'):>16}"
            f"{level['underruns']:>11}{level['achieved_rate']:>8.2f}{_shown(level['slowest_stream_rtf'], '.2f'):>11}"
        )
    goal = report["meta"]["ttfa_goal_ms"]
    held = ", ".join(
        f"{policy} {'none' if rate is None else f'{rate:g}/s'}" for policy, rate in report["highest_rate_held"].items()
    )
    lines.append(f"highest rate held (p95 first audio <= {goal:g} ms, no underrun, no error): {held or 'none ran'}")
    if report["p95_first_audio_ratios"]:
        shown = ", ".join(f"{row['level']} {row['before_over_after']:.2f}x" for row in report["p95_first_audio_ratios"])
        lines.append(f"p95 first audio, before / after: {shown}")
    return "\n".join(lines)


def _shown(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def write_report(report: dict[str, Any], json_path: Path, plot_path: Path | None) -> None:
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(report, indent=1) + "\n")
    if plot_path is not None:
        plot(report, plot_path)


def plot(report: dict[str, Any], path: Path) -> None:
    """p95 first audio and the share of requests with an underrun against the arrival rate, a line per policy; the
    bursts' figures beneath."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(8, 7))
    rates: set[float] = set()
    for policy in report["highest_rate_held"]:
        levels = [level for level in report["levels"] if level["policy"] == policy and level["kind"] == "rate"]
        x = [level["load"] for level in levels]
        rates.update(x)
        top.plot(x, [_nan(level["first_audio_p95_ms"]) for level in levels], "o-", label=policy)
        bottom.plot(x, [_nan(level["underrun_share"]) for level in levels], "o-", label=policy)
    top.axhline(report["meta"]["ttfa_goal_ms"], color="grey", linewidth=0.8, linestyle=":", label="goal")
    top.set(yscale="log", ylabel="p95 first audio (ms)", title="Time to first audio")
    top.legend()
    bottom.set(xscale="log", xlabel="arrival rate (requests/s)", ylabel="share of requests", title="Underruns")
    bottom.set_ylim(-0.05, 1.05)
    bottom.set_xticks(sorted(rates), [f"{rate:g}" for rate in sorted(rates)])
    bottom.minorticks_off()
    bursts = [
        f"{level['policy']} burst {level['load']:g}: p95 first audio {_shown(level['first_audio_p95_ms'], '.0f')} ms, "
        f"underruns {_shown(level['underrun_share'], '.0%')}, slowest {_shown(level['slowest_stream_rtf'], '.2f')}x"
        for level in report["levels"]
        if level["kind"] == "burst"
    ]
    figure.text(0.01, 0.01, "\n".join(bursts), va="bottom", fontsize=8)
    meta = report["meta"]
    figure.suptitle(f"bench-serving: {meta.get('model', '')}, {meta.get('duration')} s per rate")
    figure.tight_layout(rect=(0, 0.03 * len(bursts), 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _nan(value: float | None) -> float:
    return math.nan if value is None else value
