"""Real multi-process runs of the reference workloads under torchrun, judged without the harness: golden,
SIGKILL with the async save, resume at another world size, stop and relaunch.

The broken fixture workloads are proven broken where it matters, through the harness's verdicts
(tests/integration/test_verdicts.py asserts the duplicated/missing counts and the digest mismatch).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

REPO = Path(__file__).resolve().parents[2]
WORKLOADS = REPO / "workloads"
RUN_TIMEOUT_S = 150

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(sys.platform != "linux", reason="torchrun + gloo runs are exercised on Linux")]


@dataclass
class Run:
    rc: int
    events: list[dict]
    output: str
    wall_s: float
    kill_t: float | None = None
    ckpt_dir: Path | None = None
    by_ev: dict[str, list[dict]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        grouped: dict[str, list[dict]] = defaultdict(list)
        for e in self.events:
            grouped[e["ev"]].append(e)
        self.by_ev = dict(grouped)

    def ev(self, name: str, **match) -> list[dict]:
        return [e for e in self.by_ev.get(name, []) if all(e.get(k) == v for k, v in match.items())]

    def final_digests(self) -> dict[int, str]:
        last_attempt = max(e["attempt"] for e in self.events)
        return {e["rank"]: e["digest"] for e in self.ev("final", attempt=last_attempt)}

    def attempts(self) -> list[str]:
        return sorted({e["attempt"] for e in self.events}, key=lambda a: [int(x) for x in a.split(".")])


def read_events(events_dir: Path) -> list[dict]:
    events = []
    for path in sorted(events_dir.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                events.append(json.loads(line))
    return sorted(events, key=lambda e: e["t"])


def after_step(rank: int, step: int, attempt: str = "0.0") -> Callable[[list[dict]], int | None]:
    """Kill trigger: the pid of ``rank`` once it emitted ``step`` (in ``attempt``)."""

    def victim(events: list[dict]) -> int | None:
        hits = [e for e in events if e["ev"] == "step" and e["rank"] == rank and e["step"] >= step
                and e["attempt"] == attempt]
        return hits[0]["pid"] if hits else None

    return victim


def launch(script: Path, tmp: Path, *, nproc: int = 2, args: dict | None = None,
           kill_when: Callable[[list[dict]], int | None] | None = None, max_restarts: int = 3, name: str = "run",
           ckpt_dir: Path | None = None, launch_id: str = "0") -> Run:
    """torchrun ``script``; optionally SIGKILL the worker pid ``kill_when(events)`` names, once."""
    events_dir = tmp / f"{name}-events"
    ckpt_dir = ckpt_dir or tmp / f"{name}-ckpt"
    env = dict(os.environ, CHAOS_EVENTS_DIR=str(events_dir), CHAOS_RUN_DIR=str(tmp), CHAOS_CKPT_DIR=str(ckpt_dir),
               CHAOS_LAUNCH=launch_id, PYTHONPATH=str(REPO))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
           f"--max-restarts={max_restarts}", "--monitor-interval=0.1", str(script)]
    for key, value in {"steps": 60, "ckpt_every": 10, "seed": 0, "step_sleep": 0.05, "pg_timeout_s": 30,
                       **(args or {})}.items():
        cmd += [f"--{key.replace('_', '-')}", str(value)]
    started = time.monotonic()
    log_path = tmp / f"{name}.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        kill_t = None
        try:
            while proc.poll() is None:
                if time.monotonic() - started > RUN_TIMEOUT_S:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    pytest.fail(f"{name}: torchrun did not finish within {RUN_TIMEOUT_S}s (hung restart?); "
                                f"log {log_path}:\n{log_path.read_text()[-4000:]}")
                if kill_when is not None and kill_t is None and events_dir.is_dir():
                    pid = kill_when(read_events(events_dir))
                    if pid is not None:
                        os.kill(pid, signal.SIGKILL)
                        kill_t = time.time()
                time.sleep(0.02)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return Run(proc.returncode, read_events(events_dir) if events_dir.is_dir() else [], log_path.read_text(),
               time.monotonic() - started, kill_t, ckpt_dir)


def committed_history(run: Run) -> list[dict]:
    """Step events of the lineage that led to the final state (rolled-back steps excluded)."""
    attempts = run.attempts()
    final_attempt = attempts[-1]
    history: list[dict] = []
    attempt, upper = final_attempt, None
    while True:
        loads = run.ev("ckpt_load", attempt=attempt, rank=0)
        assert loads, f"attempt {attempt} has no ckpt_load"
        resumed = loads[0]["step"]
        steps = [e for e in run.ev("step", attempt=attempt)
                 if e["step"] > resumed and (upper is None or e["step"] <= upper)]
        history = steps + history
        if resumed == 0:
            return history
        committers = [e["attempt"] for e in run.ev("ckpt_commit", step=resumed) if e["attempt"] != attempt]
        assert committers, f"attempt {attempt} resumed from step {resumed}, which no earlier attempt committed"
        attempt, upper = committers[-1], resumed


def check_exactly_once(history: list[dict], dataset_size: int) -> None:
    by_epoch: dict[int, Counter] = defaultdict(Counter)
    for e in history:
        by_epoch[e["epoch"]].update(e["samples"])
    last = max(by_epoch)
    for epoch, counts in by_epoch.items():
        dups = sorted(i for i, c in counts.items() if c > 1)
        assert not dups, f"epoch {epoch}: duplicated indices {dups[:20]}"
        if epoch != last:
            gaps = sorted(set(range(dataset_size)) - set(counts))
            assert not gaps, f"epoch {epoch}: missing indices {gaps[:20]}"


def assert_clean(run: Run, name: str) -> None:
    assert run.rc == 0, f"{name}: torchrun exited {run.rc}\n{run.output[-4000:]}"


@pytest.fixture(scope="module")
def goldens(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    tmp = tmp_path_factory.mktemp("golden")
    return {kind: launch(WORKLOADS / f"{kind}.py", tmp, name=kind) for kind in ("ddp", "fsdp")}


@pytest.mark.parametrize("kind", ["ddp", "fsdp"])
def test_golden_run_is_complete(goldens: dict[str, Run], kind: str) -> None:
    run = goldens[kind]
    assert_clean(run, kind)
    assert run.attempts() == ["0.0"]
    digests = run.final_digests()
    assert set(digests) == {0, 1} and len(set(digests.values())) == 1  # DDP/FSDP replicas agree
    assert [e["step"] for e in run.ev("step", rank=0)] == list(range(1, 61))
    assert [e["step"] for e in run.ev("ckpt_commit")] == [10, 20, 30, 40, 50, 60]
    assert len(run.ev("start")) == 2 and run.ev("ckpt_load", step=0) and not run.ev("ckpt_error")
    history = committed_history(run)
    check_exactly_once(history, 250)
    assert {e["epoch"] for e in history} == {0, 1}  # 60 steps cross an epoch boundary
    assert any(e["samples"] == [] for e in history)  # the short last step leaves a rank with nothing
    step_dirs = sorted(p.name for p in run.ckpt_dir.glob("step_*"))
    assert step_dirs == ["step_000040", "step_000050", "step_000060"]  # retention: keep 3
    assert (run.ckpt_dir / "latest").read_text() == "step_000060"


def test_ddp_and_fsdp_goldens_agree_bit_exact(goldens: dict[str, Run]) -> None:
    # Two ranks: every reduction is a + b either way, so the two wrappers train identically.
    assert goldens["ddp"].final_digests() == goldens["fsdp"].final_digests()


# The synchronous save under the same kill is experiments/rank-kill-{ddp,fsdp}.yaml, judged by the
# harness; here the async save is judged without it, by reading the events directly.
@pytest.mark.parametrize("kind,extra", [("ddp", {"async_save": "true"}), ("fsdp", {"async_save": "true"})],
                         ids=["ddp-async", "fsdp-async"])
def test_sigkill_one_rank_recovers_to_golden_digest(goldens: dict[str, Run], tmp_path: Path, kind: str,
                                                    extra: dict) -> None:
    run = launch(WORKLOADS / f"{kind}.py", tmp_path, args=extra, kill_when=after_step(1, 25), name=kind)
    assert_clean(run, kind)
    assert run.kill_t is not None, "the victim rank never reached step 25"
    attempts = run.attempts()
    assert len(attempts) >= 2, f"no restart after the SIGKILL: {attempts}"
    resumed = run.ev("ckpt_load", attempt=attempts[-1])
    assert {e["rank"] for e in resumed} == {0, 1} and all(0 < e["step"] < 60 for e in resumed)
    assert run.final_digests() == goldens[kind].final_digests()
    check_exactly_once(committed_history(run), 250)
    first_step = min(e["t"] for e in run.ev("step", attempt=attempts[-1]))
    print(f"{kind}{extra}: attempts {attempts}, resumed from {resumed[0]['step']}, "
          f"kill -> first step of the new attempt {first_step - run.kill_t:.1f}s, wall {run.wall_s:.1f}s")


# FSDP, whose DCP checkpoint is resharded from 2 to 3 ranks; DDP under a world-size change is
# experiments/kill-node-elastic.yaml (2 nodes -> 1), judged by exactly_once.
@pytest.mark.parametrize("kind", ["fsdp"])
def test_resume_with_a_different_world_size_continues_the_cursor(tmp_path: Path, kind: str) -> None:
    ckpt = tmp_path / "ckpt"
    first = launch(WORKLOADS / f"{kind}.py", tmp_path, nproc=2, args={"steps": 30}, name="ws2", ckpt_dir=ckpt)
    assert_clean(first, "ws2")
    second = launch(WORKLOADS / f"{kind}.py", tmp_path, nproc=3, args={"steps": 45}, name="ws3", ckpt_dir=ckpt,
                    launch_id="1")
    assert_clean(second, "ws3")
    assert {e["step"] for e in second.ev("ckpt_load")} == {30}
    merged = Run(0, first.events + second.events, "", 0.0)
    history = committed_history(merged)
    check_exactly_once(history, 250)
    assert len({e["rank"] for e in history if e["attempt"] == "1.0"}) == 3
    assert len(set(second.final_digests().values())) == 1


def launch_twice(script: Path, tmp: Path, stop_at: int = 25, **kwargs) -> Run:
    """Stop cleanly at ``stop_at`` (last checkpoint 20), then relaunch to 60: a resume without a kill."""
    ckpt = tmp / "ckpt"
    first = launch(script, tmp, args={"steps": stop_at}, name="first", ckpt_dir=ckpt, **kwargs)
    assert_clean(first, "first")
    second = launch(script, tmp, name="second", ckpt_dir=ckpt, launch_id="1", **kwargs)
    assert_clean(second, "second")
    return Run(second.rc, first.events + second.events, second.output, first.wall_s + second.wall_s)


def test_stop_and_relaunch_matches_golden(goldens: dict[str, Run], tmp_path: Path) -> None:
    run = launch_twice(WORKLOADS / "ddp.py", tmp_path)
    assert {e["step"] for e in run.ev("ckpt_load", attempt="1.0")} == {20}
    assert run.final_digests() == goldens["ddp"].final_digests()
    check_exactly_once(committed_history(run), 250)
