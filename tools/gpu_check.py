"""The GPU check (issue 28), run by tools/gpu_check.sh once the kit is installed: every step in order, each in
its own process under a share of one time budget, each writing its results under OUT as soon as it ends and
printing one line; the table of every figure against the goals (OUT/summary.md) is written again after each
step, so a call cut short still brings back what was done.

    a  correctness: tests/test_gpu.py on the tiny checkpoint, then on the 0.6B; bfloat16, int8 and fp8 agreement
       with float32 (benchmarks/precision_agreement.py)                       -> a_correctness.json
    b  `bench` 0.6B bfloat16 with graphs at 1, 16, 64 and 128 streams of 125 frames -> b_bench_0.6b.json/.png
    c  the peers at one stream (official qwen-tts, faster-qwen3-tts), same checkpoint -> c_peers.json
    d  1.7B at one stream; int8 and fp8 weights at 1 and 64 streams        -> d_variants.json
    e  one step's profile at 1 and 64 rows (benchmarks/step_profile.py)     -> e_profile.json
    f  a warm tiny model's first audio while the 0.6B loads beside it in one server (benchmarks/multi_model.py)
                                                                             -> f_multi_model.json
    g  `bench-serving` through HTTP: the 0.6B under open-loop Poisson arrivals (1-60 requests/s) and a burst of 64,
       the deadline scheduler and the fixed one before it; the 1.7B at 20/s and the burst -> g_serving.json/.png
    j  synthesis with and without word timestamps, a ForcedAligner beside the 0.6B (benchmarks/timestamps_cost.py)
                                                                             -> j_timestamps.json
    every process's output                                                   -> gpu_check.log

The random-weight 0.6B and 1.7B checkpoints are built in the background from the start. `--dry-run` runs the
same steps on the CPU with the tiny and small checkpoints and small sizes (.ci/run: the script cannot rot).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESERVE_SECONDS = 8  # kept back from the budget for the summary
MIN_STEP_SECONDS = 15  # a step with less time than this left is skipped, not started


@dataclass(frozen=True)
class Plan:
    device: str
    dtype: str
    size: str  # the checkpoint of steps a-e
    big: str  # the larger one of step d
    levels: list[int]
    frames: int
    quantize: list[str]
    quantize_levels: list[int]
    agreement_frames: int
    agreement_variants: list[str]
    profile_rows: list[int]
    profile_steps: int
    peer_runs: int
    caps: dict[str, int] = field(default_factory=dict)  # each step's most seconds
    multi_rounds: int = 3  # step f's loads of the second model
    # Step g: (checkpoint size, policies, arrival rates, seconds per rate, burst) per bench-serving call.
    serving: list[tuple[str, list[str], list[float], float, int]] = field(default_factory=list)
    serving_frames: int = 100  # frames a request may make (MAX_REQUEST_FRAMES): 8 s of speech
    serving_env: dict[str, str] = field(default_factory=dict)  # the servers' settings besides
    # Step i: recognition (sizes, concurrent uploads, seconds each, tokens each, our weights' variant).
    asr_sizes: list[str] = field(default_factory=list)
    asr_uploads: list[int] = field(default_factory=list)
    asr_seconds: float = 30.0
    asr_tokens: int = 100
    asr_variant: str = "bfloat16"
    # Step j: word timestamps' cost (requests at once, runs of each mode).
    timestamps_levels: list[int] = field(default_factory=lambda: [1])
    timestamps_runs: int = 1


GPU = Plan(
    device="cuda",
    dtype="bfloat16",
    size="0.6b",
    big="1.7b",
    levels=[1, 16, 64, 128],
    frames=125,
    quantize=["int8", "fp8"],
    quantize_levels=[1, 64],
    agreement_frames=100,
    agreement_variants=["bfloat16", "bfloat16_fused", "float32_fused", "int8", "fp8"],
    profile_rows=[1, 64],
    profile_steps=20,
    peer_runs=2,
    caps={
        "a_tests": 120,
        "a_agreement": 120,
        "b": 150,
        "c": 120,
        "d": 100,
        "e": 90,
        "f": 90,
        "g": 180,
        "h": 150,
        "i": 150,
        "j": 120,
    },
    serving=[  # some 300 s in all: every request speaks 8 s, so 60/s keeps ~480 s of audio in flight
        ("0.6b", ["after"], [1, 5, 10, 20, 40, 60], 6, 64),
        ("0.6b", ["before"], [20], 6, 64),
        ("1.7b", ["after"], [20], 6, 64),
    ],
    serving_env={"MAX_BATCH_SIZE": "128", "MAX_QUEUE_DEPTH": "256"},  # a caller's 8 s in ~2 s: ~120 at 60/s
    asr_sizes=["0.6b", "1.7b"],
    asr_uploads=[1, 16, 64, 128],
    timestamps_levels=[1, 16],
    timestamps_runs=3,
)
DRY_RUN = Plan(
    device="cpu",
    dtype="float32",
    size="tiny",
    big="small",
    levels=[1, 2],
    frames=6,
    quantize=["int8"],
    quantize_levels=[1, 2],
    agreement_frames=6,
    agreement_variants=["bfloat16", "int8"],
    profile_rows=[1, 2],
    profile_steps=2,
    peer_runs=1,
    caps={
        "a_tests": 60,
        "a_agreement": 60,
        "b": 60,
        "c": 90,
        "d": 60,
        "e": 60,
        "f": 90,
        "g": 90,
        "h": 60,
        "i": 90,
        "j": 90,
    },
    multi_rounds=1,
    serving=[("tiny", ["before", "after"], [2], 2, 2)],
    serving_frames=6,
    asr_sizes=["tiny"],
    asr_uploads=[1, 2],
    asr_seconds=2.0,
    asr_tokens=4,
    asr_variant="float32",
)

# The steps by name, in the issue's order (a: the first three, b, c, d, e); --steps picks and orders them.
STEPS = {
    "tests_tiny": "tests_tiny",
    "tests_checkpoint": "tests_checkpoint",
    "agreement": "agreement",
    "streams": "streams",
    "peers": "peer_comparison",
    "variants": "variants",
    "profile": "profile",
    "multi_model": "multi_model",
    "serving": "serving",
    "unfused": "unfused",
    "recognition": "recognition",
    "timestamps": "timestamps",
}

# (label, unit, goal, higher is better): the goals of issue 28 on an H100, 0.6B unless named.
GOALS = {
    "one_stream_rtf": ("0.6B, 1 stream: x real time", "x", 20.0, True),
    "one_stream_ms_per_frame": ("0.6B, 1 stream: ms per frame", "ms", 4.0, False),
    "one_stream_ttfa_p50": ("0.6B, 1 stream: time to first audio p50", "ms", 20.0, False),
    "s64_slowest_rtf": ("0.6B, 64 streams: slowest stream x real time", "x", 1.5, True),
    "s64_ttfa_p95": ("0.6B, 64 streams: time to first audio p95", "ms", 100.0, False),
    "s128_aggregate_rtf": ("0.6B, 128 streams: aggregate x real time", "x", 100.0, True),
    "big_one_stream_rtf": ("1.7B, 1 stream: x real time", "x", 12.0, True),
    # issue 48's, through HTTP under open-loop arrivals (step g)
    "serving_20_p95": ("0.6B, 20 requests/s: first audio p95 (no underrun)", "ms", 50.0, False),
    "serving_highest_rate": ("0.6B: highest rate held, p95 <= 100 ms, no underrun", "/s", 60.0, True),
    "serving_burst_p95": ("0.6B, burst of 64: first audio p95", "ms", 150.0, False),
    "serving_burst_slowest": ("0.6B, burst of 64: slowest stream x real time", "x", 1.0, True),
    "big_serving_20_p95": ("1.7B, 20 requests/s: first audio p95 (no underrun)", "ms", 60.0, False),
}


class Check:
    def __init__(self, plan: Plan, out: Path, budget: float, peers: dict[str, str], dry_run: bool):
        self.plan, self.out, self.peers, self.dry_run = plan, out, peers, dry_run
        self.started = time.monotonic()
        self.deadline = self.started + budget
        self.work = Path(os.environ.get("GPU_CHECK_WORK", "/tmp/gpu-check"))
        shutil.rmtree(self.work, ignore_errors=True)
        (self.work / "models").mkdir(parents=True)
        self.log_path = out / "gpu_check.log"
        self.log = self.log_path.open("a", buffering=1)
        self.results: dict = {"plan": self.plan.__dict__ | {"dry_run": dry_run}, "steps": {}}
        self.builds: dict[str, subprocess.Popen] = {}
        self.problems: list[str] = []  # what did not run as it should: the exit status says whether any

    # -- processes ---------------------------------------------------------------------------------------

    def remaining(self) -> float:
        return self.deadline - time.monotonic() - RESERVE_SECONDS

    def run(
        self, label: str, command: list[str], cap: int, env: dict | None = None, ok: tuple[int, ...] = (0,)
    ) -> int | str:
        """Run a step's process with its output in the log; its exit status, or why it did not run or end. A status
        outside `ok` is a problem."""
        timeout = min(cap, self.remaining())
        if timeout < MIN_STEP_SECONDS:
            self.note(f"{label}: skipped, {max(self.remaining(), 0):.0f} s left")
            self.problems.append(f"{label}: skipped, out of time")
            return "skipped: out of time"
        self.note(f"{label}: {' '.join(command)} (at most {timeout:.0f} s)")
        started = time.monotonic()
        process = subprocess.Popen(
            command, cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
        )
        try:
            status: int | str = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            status = f"timed out after {timeout:.0f} s"
        self.note(f"{label}: {status} in {time.monotonic() - started:.1f} s")
        if status not in ok:
            self.problems.append(f"{label}: {status}")
        return status

    def build(self, size: str) -> None:
        """Start building a random-weight CustomVoice checkpoint of `size` (4 threads: the steps keep the rest)."""
        command = [sys.executable, "-m", "qwen3_tts_server.cli", "make-test-model", "--size", size]
        command.append(str(self.work / "models" / size))
        log = (self.work / f"build_{size}.log").open("w")
        env = {**os.environ, "OMP_NUM_THREADS": "4"}
        self.builds[size] = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)

    def checkpoint(self, size: str) -> Path | None:
        """The checkpoint of `size` once built; None if its build failed or outlasts the budget."""
        build = self.builds[size]
        try:
            status = build.wait(timeout=max(self.remaining(), 1))
        except subprocess.TimeoutExpired:
            status = "still building"
        log = (self.work / f"build_{size}.log").read_text(errors="replace")
        if status != 0:
            self.note(f"checkpoint {size}: {status}\n{log[-2000:]}")
            self.problems.append(f"checkpoint {size}: {status}")
            return None
        return self.work / "models" / size

    def note(self, line: str) -> None:
        self.log.write(f"\n[gpu_check +{time.monotonic() - self.started:.0f}s] {line}\n")

    def bench(self, label: str, model: Path, levels: list[int], json_path: Path, *extra: str, cap: int) -> dict:
        """`bench` on `model`: its report, or {"error": ...} when it wrote none."""
        command = [sys.executable, "-m", "qwen3_tts_server.cli", "bench", "--model", str(model)]
        command += ["--device", self.plan.device, "--dtype", self.plan.dtype, "--frames", str(self.plan.frames)]
        command += ["--concurrency", *map(str, levels), "--out", str(json_path), *extra]
        json_path.unlink(missing_ok=True)
        status = self.run(label, command, cap, ok=(0, 1))  # 1: our figures are there, a peer failed
        if json_path.exists():
            report = json.loads(json_path.read_text())
            if status != 0:
                report["status"] = status
            if status != 0 and not report["meta"].get("peer_failures"):
                self.problems.append(f"{label}: {status}")
            return report
        self.problems.append(f"{label}: {status}, no report")
        return {"error": f"bench {status}"}

    # -- the steps ---------------------------------------------------------------------------------------

    TESTS = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "tests/test_gpu.py"]

    def tests_tiny(self) -> None:
        env = {"HF_HUB_OFFLINE": "1", "GPU_TEST_CHECKPOINT": ""}
        status = self.run("a tests tiny", [*self.TESTS, "--junitxml", str(self.work / "tiny.xml")], 90, env)
        self._correctness("tests_tiny", _junit(self.work / "tiny.xml", status))

    def tests_checkpoint(self) -> None:
        model = self.checkpoint(self.plan.size)
        if model is None:
            return self._correctness("tests_checkpoint", {"error": "no checkpoint"})
        env = {"HF_HUB_OFFLINE": "1", "GPU_TEST_CHECKPOINT": str(model)}
        only = ["-k", "GPU_TEST_CHECKPOINT", "--junitxml", str(self.work / "size.xml")]
        status = self.run(f"a tests {self.plan.size}", [*self.TESTS, *only], self.plan.caps["a_tests"], env)
        self._correctness("tests_checkpoint", _junit(self.work / "size.xml", status))

    def agreement(self) -> None:
        plan, model = self.plan, self.checkpoint(self.plan.size)
        if model is None:
            return self._correctness("agreement", {"error": "no checkpoint"})
        agreement = self.work / "agreement.json"
        command = [sys.executable, "benchmarks/precision_agreement.py", "--model", str(model)]
        command += ["--size", plan.size, "--device", plan.device, "--frames", str(plan.agreement_frames)]
        command += ["--variants", *plan.agreement_variants, "--out", str(agreement)]
        status = self.run("a agreement", command, plan.caps["a_agreement"])
        self._correctness("agreement", json.loads(agreement.read_text()) if agreement.exists() else {"error": status})

    def multi_model(self) -> None:
        """f: a warm tiny model's time to first audio while the checkpoint of steps a-e loads beside it in one
        server (issue 29's figure: `benchmarks/multi_model.py`)."""
        model = self.checkpoint(self.plan.size)
        if model is None:
            return self._finish("f", {"error": "no checkpoint"}, None)
        json_path = self.out / "f_multi_model.json"
        command = [sys.executable, "benchmarks/multi_model.py", "--device", self.plan.device, "--second", str(model)]
        command += ["--rounds", str(self.plan.multi_rounds), "--no-rss", "--out", str(json_path)]
        status = self.run("f multi-model", command, self.plan.caps["f"], {"HF_HUB_OFFLINE": "1"})
        self._finish("f", json.loads(json_path.read_text()) if json_path.exists() else {"error": f"{status}"}, None)

    def serving(self) -> None:
        """g: `bench-serving` through HTTP, one call per (checkpoint, policies); the reports by "size policies"."""
        plan, step = self.plan, {}
        for size, policies, rates, seconds, burst in plan.serving:
            model = self.checkpoint(size)
            label = f"{size} {' '.join(policies)}"
            if model is None:
                step[label] = {"error": "no checkpoint"}
                continue
            json_path = self.work / f"serving_{size}_{'_'.join(policies)}.json"
            plot = self.out / "g_serving.png" if not step else self.work / "serving.png"
            command = [sys.executable, "-m", "qwen3_tts_server.cli", "bench-serving", "--model", str(model)]
            command += ["--device", plan.device, "--dtype", plan.dtype, "--policies", *policies]
            command += ["--rates", *map(str, rates), "--duration", str(seconds), "--burst", str(burst)]
            command += ["--max-frames", str(plan.serving_frames), "--out", str(json_path), "--plot", str(plot)]
            command += ["--language", "English"]  # the kit has no lingua (tools/gpu_kit.sh): nothing to detect
            json_path.unlink(missing_ok=True)
            env = {"HF_HUB_OFFLINE": "1", **plan.serving_env}
            status = self.run(f"g serving {label}", command, plan.caps["g"], env)
            missing = {"error": f"bench-serving {status}"}
            step[label] = json.loads(json_path.read_text()) if json_path.exists() else missing
            self._finish("g", step, "g_serving.json", final=False)
        self._finish("g", step, "g_serving.json")

    def _correctness(self, part: str, result: dict) -> None:
        self._finish("a", self.results["steps"].get("a", {}) | {part: result}, "a_correctness.json", final=False)
        print(f"a {part}: {step_line('a', {part: result})}", flush=True)

    def streams(self) -> None:
        model = self.checkpoint(self.plan.size)
        if model is None:
            return self._finish("b", {"error": "no checkpoint"}, None)
        json_path = self.out / f"b_bench_{self.plan.size}.json"
        report = self.bench("b bench", model, self.plan.levels, json_path, cap=self.plan.caps["b"])
        self._finish("b", report, None)

    def unfused(self) -> None:
        """Step h: step b's streams with the code predictor's fused kernels off (issue 49), to set beside b's (on
        where they can run: its meta says)."""
        model = self.checkpoint(self.plan.size)
        if model is None:
            return self._finish("h", {"error": "no checkpoint"}, None)
        json_path = self.out / f"h_unfused_{self.plan.size}.json"
        off = ("--fused-kernels", "off")
        report = self.bench("h unfused", model, self.plan.levels, json_path, *off, cap=self.plan.caps["h"])
        self._finish("h", report, None)

    def recognition(self) -> None:
        """Step i (issue 50): concurrent uploads through our recogniser (encoded and prefilled together, the token
        step from CUDA graphs) beside the official qwen-asr in the same call, per size (its checkpoint built there:
        an ASR one, of its own). The official package runs from the official peer's folder, with its transformers."""
        plan, step = self.plan, {}
        official = self.peers.get("official")
        env = {"PYTHONPATH": f"{official}:{os.environ.get('PYTHONPATH', '')}"} if official else None
        for size in plan.asr_sizes:
            json_path = self.work / f"asr_{size}.json"
            command = [sys.executable, "benchmarks/asr_speed_vs_official.py", "--size", size, "--device", plan.device]
            command += ["--seconds", str(plan.asr_seconds), "--tokens", str(plan.asr_tokens)]
            command += ["--concurrency", *map(str, plan.asr_uploads), "--variants", plan.asr_variant]
            command += ["--out", str(json_path)]
            status = self.run(f"i {size}", command, plan.caps["i"], env)
            step[size] = json.loads(json_path.read_text()) if json_path.exists() else {"error": str(status)}
            self._finish("i", step, "i_recognition.json", final=False)
        self._finish("i", step, "i_recognition.json")

    def timestamps(self) -> None:
        """Step j (issue 52): synthesis with and without word timestamps in one run, the checkpoint of steps a-e
        beside a random ForcedAligner of its size (`benchmarks/timestamps_cost.py`)."""
        plan, model = self.plan, self.checkpoint(self.plan.size)
        if model is None:
            return self._finish("j", {"error": "no checkpoint"}, None)
        json_path = self.out / "j_timestamps.json"
        command = [sys.executable, "benchmarks/timestamps_cost.py", "--model", str(model), "--size", plan.size]
        command += ["--runs", str(plan.timestamps_runs), "--concurrency", *map(str, plan.timestamps_levels)]
        status = self.run("j timestamps", command + ["--out", str(json_path)], plan.caps["j"], {"HF_HUB_OFFLINE": "1"})
        self._finish("j", json.loads(json_path.read_text()) if json_path.exists() else {"error": str(status)}, None)

    def peer_comparison(self) -> None:
        """One `bench` call per peer (the stronger, faster-qwen3-tts, first), each beside our one stream: a peer
        that runs past its share of the time costs only its own figures."""
        model = self.checkpoint(self.plan.size)
        if model is None:
            return self._finish("c", {"error": "no checkpoint"}, None)
        merged: dict = {"peers": [], "failures": {}}
        for name in sorted(self.peers, key=lambda peer: peer != "faster"):
            extra = ["--peer", f"{name}={self.peers[name]}", "--peer-runs", str(self.plan.peer_runs)]
            extra += ["--plot", str(self.work / "peers.png")]
            json_path = self.work / f"peer_{name}.json"
            report = self.bench(f"c {name}", model, [1], json_path, *extra, cap=self.plan.caps["c"])
            if "results" in report:
                merged.setdefault("results", report["results"])  # ours at one stream, from the first call
                merged.setdefault("meta", report["meta"])
                merged["peers"] += report.get("peers", [])
            failure = report.get("meta", {}).get("peer_failures", {}).get(name) or report.get("error")
            if failure:
                merged["failures"][name] = failure
            self._finish("c", merged, "c_peers.json", final=False)
        self._finish("c", merged, "c_peers.json")

    def variants(self) -> None:
        plan, step = self.plan, {}
        plot = ["--plot", str(self.work / "variant.png")]
        big = self.checkpoint(plan.big)
        if big is not None:
            step[plan.big] = self.bench(f"d {plan.big}", big, [1], self.work / "big.json", *plot, cap=plan.caps["d"])
            self._finish("d", step, "d_variants.json", final=False)
        model = self.checkpoint(plan.size)
        for mode in plan.quantize if model is not None else []:
            quantized = ["--quantize", mode, *plot]
            json_path = self.work / f"{mode}.json"
            step[mode] = self.bench(f"d {mode}", model, plan.quantize_levels, json_path, *quantized, cap=plan.caps["d"])
            self._finish("d", step, "d_variants.json", final=False)
        self._finish("d", step, "d_variants.json")

    def profile(self) -> None:
        model = self.checkpoint(self.plan.size)
        if model is None:
            return self._finish("e", {"error": "no checkpoint"}, None)
        json_path = self.out / "e_profile.json"
        command = [sys.executable, "benchmarks/step_profile.py", "--model", str(model), "--device", self.plan.device]
        command += ["--dtype", self.plan.dtype, "--rows", *map(str, self.plan.profile_rows)]
        command += ["--steps", str(self.plan.profile_steps), "--out", str(json_path)]
        json_path.unlink(missing_ok=True)
        status = self.run("e profile", command, self.plan.caps["e"])
        self._finish("e", json.loads(json_path.read_text()) if json_path.exists() else {"error": str(status)}, None)

    def _finish(self, step: str, result: dict, file_name: str | None, final: bool = True) -> None:
        self.results["steps"][step] = result
        if file_name is not None:
            (self.out / file_name).write_text(json.dumps(result, indent=1) + "\n")
        if final:
            print(f"{step}: {step_line(step, result)}", flush=True)
        (self.out / "summary.md").write_text(summary(self.results))

    def finish(self) -> None:
        """Draw the peers on the streams' plot (b's JSON gains the ratios), and stop what still builds."""
        streams, peers = self.results["steps"].get("b", {}), self.results["steps"].get("c", {})
        if "results" in streams and peers.get("peers"):
            from qwen3_tts_server.bench.peers import PeerResult
            from qwen3_tts_server.bench.streams import LevelResult, write_results

            levels = [LevelResult(**row) for row in streams["results"]]
            measured = [PeerResult(**peer) for peer in peers["peers"]]
            json_path = self.out / f"b_bench_{self.plan.size}.json"
            write_results(levels, streams["meta"], json_path, json_path.with_suffix(".png"), measured)
            self.results["steps"]["b"] = json.loads(json_path.read_text())
        for build in self.builds.values():
            if build.poll() is None:
                build.kill()
        (self.out / "summary.md").write_text(summary(self.results))


def _junit(path: Path, status: int | str) -> dict:
    """Counts and failures from pytest's JUnit XML."""
    if not path.exists():
        return {"error": f"pytest {status}"}
    suite = ElementTree.parse(path).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    counts = {key: int(suite.get(key, 0)) for key in ("tests", "failures", "errors", "skipped")}
    failed = {}
    for case in suite.iter("testcase"):
        for problem in (*case.findall("failure"), *case.findall("error")):
            failed[case.get("name")] = (problem.get("message") or "")[:600]
    passed = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    return {"passed": passed, **{k: counts[k] for k in ("failures", "errors", "skipped")}, "failed": failed}


# -- the report ---------------------------------------------------------------------------------------------


def _level(report: dict, concurrency: int) -> dict | None:
    return next((row for row in report.get("results", []) if row["concurrency"] == concurrency), None)


def _serving_level(steps: dict, size: str, policy: str, kind: str, load: float) -> dict | None:
    """Step g's figures of one level, from the report of the call that ran `policy` on `size`."""
    for label, report in steps.get("g", {}).items():
        if label.split()[0] == size:
            for level in report.get("levels", []):
                if (level["policy"], level["kind"], level["load"]) == (policy, kind, load):
                    return level
    return None


def _p95_without_underrun(level: dict | None) -> float | None:
    """A level's p95 first audio, or None (not met, whatever the time) when a request underran or failed."""
    if level is None or level["underruns"] or level["errors"]:
        return None
    return level["first_audio_p95_ms"]


def measured_goals(steps: dict) -> dict[str, float | None]:
    streams, big = steps.get("b", {}), steps.get("d", {})
    one, s64, s128 = (_level(streams, n) for n in (1, 64, 128))
    big_one = next((_level(report, 1) for name, report in big.items() if name not in ("int8", "fp8", "int4")), None)
    return {
        "one_stream_rtf": one and one["stream_rtf_p50"],
        "one_stream_ms_per_frame": one and round(80 / one["stream_rtf_p50"], 2),
        "one_stream_ttfa_p50": one and one["ttfa_p50_ms"],
        "s64_slowest_rtf": s64 and s64["stream_rtf_min"],
        "s64_ttfa_p95": s64 and s64["ttfa_p95_ms"],
        "s128_aggregate_rtf": s128 and s128["aggregate_rtf"],
        "big_one_stream_rtf": big_one and big_one["stream_rtf_p50"],
        "serving_20_p95": _p95_without_underrun(_serving_level(steps, "0.6b", "after", "rate", 20)),
        "serving_highest_rate": next(
            (r["highest_rate_held"].get("after") for k, r in steps.get("g", {}).items() if k == "0.6b after"), None
        ),
        "serving_burst_p95": (burst := _serving_level(steps, "0.6b", "after", "burst", 64))
        and burst["first_audio_p95_ms"],
        "serving_burst_slowest": burst and burst["slowest_stream_rtf"],
        "big_serving_20_p95": _p95_without_underrun(_serving_level(steps, "1.7b", "after", "rate", 20)),
    }


def verdict(value: float | None, goal: float, higher: bool) -> str:
    if value is None:
        return "not measured"
    if (value >= goal) if higher else (value <= goal):
        return "met"
    short = (goal - value) / goal if higher else (value - goal) / goal
    return f"missed by {100 * short:.0f}%"


def _levels_table(title: str, report: dict) -> list[str]:
    if "results" not in report:
        return [f"{title}: {report.get('error', 'not run')}", ""]
    meta = report.get("meta", {})
    lines = [
        f"{title} ({meta.get('dtype')}, quantize {meta.get('quantize')}, graphs {meta.get('cuda_graphs')}, "
        f"fused kernels {meta.get('fused_kernels')}, "
        f"peak GPU memory {meta.get('gpu_memory_gib')} GiB)",
        "",
        "| streams | TTFA p50 | TTFA p95 | per stream p50 | slowest stream | aggregate |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for row in report["results"]:
        lines.append(
            f"| {row['concurrency']} | {row['ttfa_p50_ms']} ms | {row['ttfa_p95_ms']} ms | {row['stream_rtf_p50']}x "
            f"| {row['stream_rtf_min']}x | {row['aggregate_rtf']}x |"
        )
    return lines + [""]


def summary(results: dict) -> str:
    steps = results["steps"]
    lines = ["# GPU check", "", f"Plan: `{json.dumps(results['plan'])}`", "", "## Goals", ""]
    lines += ["| figure | goal | measured | verdict |", "|---|---:|---:|---|"]
    for key, value in measured_goals(steps).items():
        label, unit, goal, higher = GOALS[key]
        shown = "-" if value is None else f"{value}{' ' if unit == 'ms' else ''}{unit}"
        lines.append(
            f"| {label} | {'>=' if higher else '<='} {goal:g}{unit} | {shown} | {verdict(value, goal, higher)} |"
        )
    lines.append("")
    correctness = steps.get("a", {})
    for name, value in correctness.items():
        if name.startswith("tests_"):
            lines.append(f"- {name}: {_tests_line(value)}")
    for name, value in correctness.get("agreement", {}).items():
        if isinstance(value, dict):
            lines.append(f"- agreement with float32, {name}: {value.get('all_codes')} of codes")
    lines.append("")
    lines += _levels_table("## b: streams", steps.get("b", {}))
    lines += _levels_table("## h: streams, the code predictor's fused kernels off", steps.get("h", {}))
    peers = steps.get("c", {})
    lines += ["## c: the peers at one stream", ""]
    ours = _level(peers, 1)
    if ours:
        lines.append(f"- ours: {ours['stream_rtf_p50']}x real time, first audio {ours['ttfa_p50_ms']} ms")
    for peer in peers.get("peers", []):
        ratio = f", ours {ours['stream_rtf_p50'] / peer['rtf_p50']:.1f}x faster" if ours else ""
        lines.append(
            f"- {peer['peer']} {peer['version']}: {peer['rtf_p50']}x real time, first audio {peer['ttfa_p50_ms']} ms, "
            f"a request {peer['request_p50_ms']} ms, GPU memory {peer['gpu_memory_gib']} GiB{ratio}"
        )
    for name, reason in peers.get("failures", {}).items():
        lines.append(f"- {name}: failed: {reason.strip().splitlines()[-1] if reason.strip() else reason}")
    if "error" in peers:
        lines.append(f"- {peers['error']}")
    lines.append("")
    for name, report in steps.get("d", {}).items():
        lines += _levels_table(f"## d: {name}", report)
    profile = steps.get("e", {})
    lines += ["## e: one step's profile (ms)", ""]
    if profile.get("results"):
        keys = [k for k in profile["results"][0] if k not in ("rows", "served_step")]
        lines += ["| rows | " + " | ".join(keys) + " |", "|---:|" + "---:|" * len(keys)]
        lines += [f"| {row['rows']} | " + " | ".join(str(row[k]) for k in keys) + " |" for row in profile["results"]]
    else:
        lines.append(profile.get("error", "not run"))
    multi = steps.get("f", {})
    lines += ["", "## f: a warm model's first audio while another loads", ""]
    lines += [f"- {key}: {value}" for key, value in multi.get("stall", {}).items()] or [multi.get("error", "not run")]
    lines += ["", "## g: serving through HTTP (Poisson arrivals, a burst)", ""]
    for label, report in steps.get("g", {}).items() or {"": {"error": "not run"}}.items():
        lines += _serving_table(label, report)
    lines += ["", "## i: recognition, concurrent uploads beside the official qwen-asr", ""]
    for size, report in steps.get("i", {}).items() or {"": {"error": "not run"}}.items():
        lines += _recognition_lines(size, report)
    timestamps = steps.get("j", {"error": "not run"})
    lines += ["", "## j: synthesis with and without word timestamps", ""]
    lines.append(f"- {timestamps['error']}" if "error" in timestamps else f"- {step_line('j', timestamps)}")
    return "\n".join(lines) + "\n"


def _recognition_lines(size: str, report: dict) -> list[str]:
    if "rows" not in report:
        return [f"- {size}: {report.get('error', 'not run')}"]
    lines = [f"- {size} ({report['workload']}; official {report.get('official_failure') or 'ran'}):"]
    for row in report["rows"]:
        versus = f", {row['vs_official']}x the official" if row.get("vs_official") is not None else ""
        lines.append(
            f"  - {row['engine']} {row['weights']}, {row['clips']} uploads: {row['seconds']} s, "
            f"{row['real_time_factor']}x real time{versus}"
        )
    return lines


def _serving_table(label: str, report: dict) -> list[str]:
    if "levels" not in report:
        return [f"- {label}: {report.get('error')}".replace("- : ", ""), ""]
    lines = [f"{label}: highest rate held {report['highest_rate_held']}", ""]
    lines += ["| policy | level | requests | errors | first audio p50 / p95 / p99 | with underruns | slowest stream |"]
    lines += ["|---|---|---:|---|---:|---:|---:|"]
    for level in report["levels"]:
        name = f"{level['load']:g}/s" if level["kind"] == "rate" else f"burst {level['load']:g}"
        first = " / ".join(str(level[f"first_audio_{p}_ms"]) for p in ("p50", "p95", "p99"))
        lines.append(
            f"| {level['policy']} | {name} | {level['requests']} | {level['errors'] or '-'} | {first} ms "
            f"| {level['underrun_share']} | {level['slowest_stream_rtf']}x |"
        )
    return lines + [""]


def _tests_line(value: dict) -> str:
    if "error" in value:
        return value["error"]
    line = f"{value['passed']} passed, {value['failures'] + value['errors']} failed, {value['skipped']} skipped"
    return line + "".join(f"; {name}: {message}" for name, message in value["failed"].items())


def step_line(step: str, result: dict) -> str:
    if "error" in result:
        return result["error"]
    if step == "a":
        tests = [f"{k[6:]}: {_tests_line(v)}" for k, v in result.items() if k.startswith("tests_")]
        agreed = [f"{k} {v['all_codes']}" for k, v in result.get("agreement", {}).items() if isinstance(v, dict)]
        return "; ".join(tests + (["agreement " + ", ".join(agreed)] if agreed else []))
    if step in ("b", "c", "h"):
        rows = [
            f"{r['concurrency']}: {r['stream_rtf_p50']}x, TTFA {r['ttfa_p50_ms']} ms" for r in result.get("results", [])
        ]
        peers = [f"{p['peer']} {p['rtf_p50']}x, TTFA {p['ttfa_p50_ms']} ms" for p in result.get("peers", [])]
        return "; ".join(rows + peers + [f"{name} failed" for name in result.get("failures", {})])
    if step == "d":
        return "; ".join(f"{name}: {step_line('b', report)}" for name, report in result.items())
    if step == "i":
        return "; ".join(
            f"{size} {row['engine']} x{row['clips']}: {row['real_time_factor']}x"
            for size, report in result.items()
            for row in report.get("rows", [])
        )
    if step == "g":
        return "; ".join(
            f"{label} {level['policy']} {level['kind']} {level['load']:g}: p95 {level['first_audio_p95_ms']} ms, "
            f"underruns {level['underruns']}"
            for label, report in result.items()
            for level in report.get("levels", [])
        )
    if step == "j":
        return "; ".join(
            f"{level[12:]} {mode}: TTFA {row['first_audio_p50_ms']} ms, {row['rtf_median']}x"
            + (f", words lag p95 {row['words_lag_p95_ms']} ms" if "words_lag_p95_ms" in row else "")
            for level, modes in result.items()
            if level.startswith("concurrency_")
            for mode, row in modes.items()
        )
    if step == "e":
        return "; ".join(
            f"{r['rows']} rows: {r['served_ms_per_step']} ms served, {r['busy_ms']} ms busy" for r in result["results"]
        )
    return json.dumps(result)[:300]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--budget", type=float, required=True, help="seconds for every step together")
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--peer", action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--steps", nargs="+", choices=STEPS, default=list(STEPS), help="which, in this order")
    parser.add_argument("--peers", nargs="+", choices=("official", "faster"), help="which peers (default both)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    plan = DRY_RUN if args.dry_run else GPU
    peers = dict(spec.split("=", 1) for spec in args.peer)
    peers = {name: path for name, path in peers.items() if args.peers is None or name in args.peers}
    check = Check(plan, args.out, args.budget, peers, args.dry_run)
    check.build(plan.size)
    if "variants" in args.steps:
        check.build(plan.big)
    if "serving" in args.steps:
        for size in {call[0] for call in plan.serving} - set(check.builds):
            check.build(size)
    for name in args.steps:
        step = getattr(check, STEPS[name])
        try:
            step()
        except Exception as exc:  # one step's bug must not cost the others' figures
            check.note(f"{step.__name__} raised {type(exc).__name__}: {exc}")
            check.problems.append(f"{step.__name__} raised {type(exc).__name__}: {exc}")
            print(f"{step.__name__}: raised {type(exc).__name__}: {exc}", flush=True)
    check.finish()
    print((args.out / "summary.md").read_text(), flush=True)
    if check.problems:
        print("problems:\n" + "\n".join(f"- {problem}" for problem in check.problems), flush=True)
    return 1 if check.problems else 0


if __name__ == "__main__":
    sys.exit(main())
