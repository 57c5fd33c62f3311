"""The harness leaves nothing behind: per fault kind, SIGKILL + ``chaos cleanup``, and SIGINT alone.

For every registered fault kind a small experiment is built from that kind's example in
``experiments/`` (only that fault, no ``duration_s`` so it stays active, a workload far longer than
the test). ``chaos run`` is started as a subprocess; once harness.jsonl records ``fault_inject`` the
harness is interrupted. Afterwards ``chaos.runtime.safety.find_leftovers`` must find nothing of the run:

- processes: any live process whose environment carries this run's ``CHAOS_RUN_DIR`` (the torchrun
  agent, every worker, re-parented or in its own session), and every PID the ledger launched;
- mounts: anything mounted at or below the run directory or the run's checkpoint directory;
- namespaces, links, nft tables, qdiscs, containers: ``ip netns list``, ``ip -o link show``,
  ``nft list tables``, ``tc qdisc show`` and ``docker ps -a`` entries named for the run's tag;
- files and everything else a fault recorded: each ledger entry's own probe (ballast file still
  there, rank still SIGSTOPped, checkpoint not restored, filesystem still read-only, ...);
- the ledger itself: closed, and the run no longer listed by ``chaos cleanup`` as unfinished.

Before the interrupt the same inspection must find the run's processes, so the checks can fail.
A fault kind without an example experiment and without an entry in ``SCENARIO_OVERRIDES`` fails.

The interrupt paths test the harness's own bookkeeping (ledger, process inventory, reverts), which
does not depend on what the workers compute. Every kind whose fault acts on processes, on the
checkpoint directory's filesystem, on the nodes' network, on the XID sink, on a Slurm node or inside
the step (an in-step fault is a command file the harness writes into the run directory and removes on
revert; what the ranks do with it is theirs) (not on a checkpoint's contents) runs under
tests/fixtures/fake_torchrun.py: a torch-free agent with
torchrun's process tree and environment, one per node on multi-node targets, which starts in a
fraction of a second instead of the ~10 CPU-seconds of a torchrun + two ranks on a 2-core runner.
corrupt-checkpoint, requeue (its job is requeued at once without torch's slow teardown, so nothing
is left alive to interrupt) and kill-rank under SIGINT run under the real torch workload; every kind also
runs to its end and reverts under the real workload in experiments/.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from chaos.pytest_plugin import HOST_KUBERNETES
from chaos.spec.load import load_experiment
from chaos.runtime.ledger import Ledger, unfinished_runs
from chaos.registry import FAULTS
from chaos.runtime.safety import find_leftovers, run_processes

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENTS = ROOT / "experiments"
INJECT_TIMEOUT_S = 240.0
EXIT_TIMEOUT_S = 90.0
REQUEUE_WAIT_S = 60.0
"""How long a run whose processes the fault ended (a preempted Slurm job) may take to start them again."""

FAKE_TORCHRUN = ROOT / "tests" / "fixtures" / "fake_torchrun.py"
FAKE_OK = {"kill-rank", "hang-rank", "straggler", "storage-full", "read-only-storage", "partition",
           "network-degrade", "kill-node", "xid", "preempt", "nan", "loss-spike", "bitflip", "oom", "collective-error",
           "slow-storage", "write-error", "nvrx-fault", "pod-delete", "container-kill", "node-drain", "node-notready"}
"""Kinds whose interrupt paths run under the torch-free agent (see the module docstring)."""

SCENARIO_OVERRIDES: dict[str, dict[str, Any]] = {
    # A stopped rank must stay stopped until the interrupt: no process-group timeout restarting it.
    "hang-rank": {"args": {"pg_timeout_s": 600}},
}
"""Per kind: workload args merged over the example's (the fault itself is taken from the example)."""


@functools.cache
def _experiments() -> tuple[tuple[Path, dict[str, Any]], ...]:
    """Every example experiment, read once (the parametrization asks for each kind's at collection)."""
    return tuple((path, yaml.safe_load(path.read_text())) for path in sorted(EXPERIMENTS.glob("*.yaml")))


def _example_for(kind: str) -> tuple[Path, dict[str, Any]] | None:
    """The cheapest example of ``kind``: on the local target if one is, with the reference DDP workload if one
    is (a torchrun + two DDP ranks start in a few CPU-seconds; a Slurm cluster or an HF/Accelerate import
    costs several times that, and the interrupt paths judged here are the harness's, not the stack's), and
    one whose trigger waits for no particular workload event if one does (a save's phase, ``ckpt_staged``,
    is an event the torch-free agent never emits: its fault would never fire)."""
    found = []
    for path, raw in _experiments():
        mine = [f for f in raw.get("faults") or [] if isinstance(f, dict) and f.get("kind") == kind]
        if mine:
            target = raw.get("target", "local")
            local = (target if isinstance(target, str) else target.get("kind")) == "local"
            ddp = (raw.get("workload") or {}).get("script") == "workloads/ddp.py"
            on_event = "on_event" in json.dumps(mine[0].get("trigger"))
            found.append((not local, not ddp, on_event, path.name, path, raw))
    return min(found, key=lambda x: x[:4])[4:] if found else None


def _kinds() -> list[Any]:
    """Every fault kind; those whose scenario runs on this host's one local Kubernetes in its xdist group, so that
    they queue on the group's worker rather than hold other workers idle in the cluster's lock (tests/conftest.py)."""
    out = []
    for kind in FAULTS.kinds():
        found = _example_for(kind)
        target = found[1].get("target") if found else None
        local_kube = isinstance(target, dict) and target.get("kind") == "kubernetes" and \
            target.get("cluster", "local") == "local"
        out.append(pytest.param(kind, marks=[pytest.mark.xdist_group(HOST_KUBERNETES)] if local_kube else []))
    return out


def scenario(kind: str, tmp: Path, fake: bool = False) -> Path:
    """A long-running experiment whose only fault is ``kind``, active from injection to the end.

    ``fake``: the workload is the torch-free agent (two workers, the same step events) in place of
    the example's torchrun script, for the kinds in FAKE_OK."""
    found = _example_for(kind)
    if found is None:
        pytest.fail(f"fault kind '{kind}' has no safety scenario: add an example experiments/<name>.yaml "
                    f"using it (every fault needs one anyway), or an entry in SCENARIO_OVERRIDES")
    path, raw = found
    exp = load_experiment(path)
    faults = [dict(f) for f in raw["faults"] if f.get("kind") == kind][:1]
    faults[0].pop("duration_s", None)
    workload = dict(raw["workload"])
    if workload.get("script"):
        workload["script"] = str(exp.resolve_script())
    args = dict(workload.get("args") or {})
    args["steps"] = 100000
    args.update(SCENARIO_OVERRIDES.get(kind, {}).get("args", {}))
    workload["args"] = args
    workload["max_restarts"] = 100
    if fake:
        assert kind in FAKE_OK, f"{kind} needs its real workload"
        workload = {"command": [sys.executable, str(FAKE_TORCHRUN), "--nproc", str(workload.get("nproc_per_node", 2)),
                                "--max-restarts", "100", "--steps", "100000", "--ckpt-every", "5",
                                "--step-sleep", "0.05", "--nnodes", "{nnodes}", "--node-rank", "{node_rank}"]}
    doc = {"name": "safety-" + re.sub(r"[^A-Za-z0-9._-]", "-", kind), "workload": workload,
           "target": raw.get("target", "local"), "faults": faults, "checks": [], "timeout_s": 3600,
           "seed": raw.get("seed", 0)}
    out = tmp / f"safety-{kind}.yaml"
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    load_experiment(out)  # the scenario itself must be valid, or the test proves nothing
    return out


class Harness:
    """One ``chaos run`` subprocess with an isolated state directory."""

    def __init__(self, exp: Path, tmp: Path) -> None:
        self.tmp = tmp
        self.runs = tmp / "runs"
        self.env = {**os.environ, "CHAOS_STATE_DIR": str(tmp / "state"), "PYTHONUNBUFFERED": "1"}
        self.out = open(tmp / "harness.out", "w+b")
        self.proc = subprocess.Popen([sys.executable, "-m", "chaos", "run", str(exp), "--runs-dir", str(self.runs)],
                                     cwd=tmp, env=self.env, stdout=self.out, stderr=subprocess.STDOUT)
        self.run_dir: Path | None = None

    def output(self) -> str:
        self.out.flush()
        return (self.tmp / "harness.out").read_text(errors="replace")

    def wait_for_fault(self, kind: str) -> Path:
        deadline = time.monotonic() + INJECT_TIMEOUT_S
        while time.monotonic() < deadline:
            dirs = sorted(self.runs.glob("*/harness.jsonl")) if self.runs.exists() else []
            if dirs:
                self.run_dir = dirs[0].parent
                for line in dirs[0].read_text().splitlines():
                    rec = _json(line)
                    if rec.get("ev") == "fault_inject" and rec.get("kind") == kind:
                        return self.run_dir
                    if rec.get("ev") == "fault_error" and rec.get("kind") == kind:
                        pytest.fail(f"{kind} could not be injected: {rec.get('error')}")
            code = self.proc.poll()
            if code is not None:
                text = self.output()
                if code == 2:
                    missing = _missing_capability(text)
                    if missing is None:  # root and docker are here: a refusal is a regression, not a skip
                        pytest.fail(f"{kind}: refused with exit 2 on a host that has root and docker:\n{text[-2000:]}")
                    pytest.skip(f"{kind}: this host lacks {missing}; run as root with dockerd started "
                                f"(bash scripts/setup.sh, or in CI with .ci/run): {text.strip()[-400:]}")
                pytest.fail(f"chaos run exited {code} before {kind} was injected:\n{text[-3000:]}")
            time.sleep(0.2)
        pytest.fail(f"{kind} was not injected within {INJECT_TIMEOUT_S:g} s:\n{self.output()[-3000:]}")

    def wait_exit(self) -> int:
        try:
            return self.proc.wait(timeout=EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the harness did not exit within {EXIT_TIMEOUT_S:g} s of the interrupt:\n{self.output()[-3000:]}")

    def cleanup(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "chaos", "cleanup", *args], cwd=self.tmp, env=self.env,
                              capture_output=True, text=True, timeout=180)

    def close(self) -> None:
        """After the test, pass or fail: nothing of this run may outlive it on the test machine."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.run_dir is not None and (self.run_dir / "ledger.jsonl").exists():
            self.cleanup("--force", str(self.run_dir))
        self.out.close()


def _json(line: str) -> dict[str, Any]:
    try:
        rec = json.loads(line)
    except json.JSONDecodeError:
        return {}
    return rec if isinstance(rec, dict) else {}


def _live_processes(run_dir: Path) -> list:
    """The run's live processes, waiting for them where the fault itself ended them: Slurm's preemption
    SIGTERMs the job's tasks (the torch-free agent and its workers exit at once) and they come back
    when the requeued job starts. Without the wait, a kill that landed after the preemption found no
    process to prove cleanup with (a rare failure at -n 5, reproduced by delaying the kill 3 s)."""
    deadline = time.monotonic() + REQUEUE_WAIT_S
    while not (procs := run_processes(run_dir)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return procs


def _assert_clean(harness: Harness) -> None:
    run_dir = harness.run_dir
    assert run_dir is not None
    left = find_leftovers(run_dir)
    assert not left, "left behind:\n" + "\n".join(f"  {x.kind}: {x.what}" for x in left)
    assert Ledger(run_dir).closed, f"ledger of {run_dir} was not closed"
    old = os.environ.get("CHAOS_STATE_DIR")
    os.environ["CHAOS_STATE_DIR"] = harness.env["CHAOS_STATE_DIR"]
    try:
        assert run_dir.resolve() not in [d.resolve() for d in unfinished_runs()]
    finally:
        if old is None:
            os.environ.pop("CHAOS_STATE_DIR")
        else:
            os.environ["CHAOS_STATE_DIR"] = old


def _missing_capability(text: str) -> str | None:
    """What this host lacks that a refused (exit 2) run needed, or None when it has root and docker."""
    if os.geteuid() != 0:
        return "root"
    if "no Kubernetes build is cached" in text:
        # The local cluster's binaries are built once per machine (about 7 CPU-minutes), not by every setup.
        return "the local Kubernetes build (bash scripts/kube-build.sh, once per machine)"
    if "docker" in text.lower():
        ok = shutil.which("docker") and subprocess.run(["docker", "info"], capture_output=True).returncode == 0
        if not ok:
            return "a running docker daemon"
    return None


@pytest.fixture
def harness_for(tmp_path: Path):
    made: list[Harness] = []

    def start(kind: str, fake: bool = False) -> Harness:
        h = Harness(scenario(kind, tmp_path, fake=fake and kind in FAKE_OK), tmp_path)
        made.append(h)
        return h

    yield start
    for h in made:
        h.close()


@pytest.mark.parametrize("kind", _kinds())
def test_sigkill_then_cleanup_leaves_nothing(kind: str, harness_for) -> None:
    h = harness_for(kind, fake=True)
    run_dir = h.wait_for_fault(kind)
    assert _live_processes(run_dir), "the run has no live process before the kill: the check below would prove nothing"
    h.proc.send_signal(signal.SIGKILL)
    h.proc.wait(timeout=30)
    assert _live_processes(run_dir), "the workload died with the harness: nothing was left for cleanup to prove"
    # No argument: cleanup finds the abandoned run by itself.
    res = h.cleanup()
    assert res.returncode == 0, f"chaos cleanup failed:\n{res.stdout}\n{res.stderr}"
    assert str(run_dir.resolve()) in res.stdout or str(run_dir) in res.stdout, res.stdout
    _assert_clean(h)
    again = h.cleanup()
    assert again.returncode == 0 and "no unfinished runs" in again.stdout, again.stdout


@pytest.mark.parametrize("kind", _kinds())
def test_sigint_reverts_without_cleanup(kind: str, harness_for) -> None:
    h = harness_for(kind, fake=kind != "kill-rank")
    h.wait_for_fault(kind)
    h.proc.send_signal(signal.SIGINT)
    code = h.wait_exit()
    assert code != 0, f"an interrupted run must not pass:\n{h.output()[-2000:]}"
    _assert_clean(h)


@pytest.mark.parametrize("kind", [k for k in ("hang-rank", "kill-rank") if k in FAULTS.kinds()])
def test_sigterm_reverts_without_cleanup(kind: str, harness_for) -> None:
    h = harness_for(kind, fake=True)
    h.wait_for_fault(kind)
    h.proc.send_signal(signal.SIGTERM)
    h.wait_exit()
    _assert_clean(h)


@pytest.mark.skipif("hang-rank" not in FAULTS.kinds(), reason="needs the hang-rank fault")
def test_second_interrupt_skips_reverts_and_says_what_is_left(harness_for) -> None:
    h = harness_for("hang-rank", fake=True)
    run_dir = h.wait_for_fault("hang-rank")
    h.proc.send_signal(signal.SIGINT)
    time.sleep(0.05)
    h.proc.send_signal(signal.SIGINT)
    code = h.wait_exit()
    text = h.output()
    assert code == 130, text
    if "second interrupt" not in text:
        # The first interrupt's reverts finished before the second arrived: then nothing may be left.
        assert "Left behind:" not in text, text
        _assert_clean(h)
        return
    assert "Left behind:" in text and f"chaos cleanup {run_dir}" in text, text
    assert "kill -CONT" in text or "pkill -KILL" in text, text
    res = h.cleanup(str(run_dir))
    assert res.returncode == 0, f"{res.stdout}\n{res.stderr}"
    _assert_clean(h)


@pytest.mark.skipif(shutil.which("mount") is None, reason="needs mount(8)")
def test_dry_run_executes_nothing(tmp_path: Path) -> None:
    """Every experiment in experiments/: the plan names commands, and no process, mount or ledger action appears."""
    env = {**os.environ, "CHAOS_STATE_DIR": str(tmp_path / "state")}

    def mounts_here() -> list[str]:
        # Only mounts this dry run could have made: other tests in parallel workers mount and unmount
        # their own storage faults (seen as a rerun of this test under -n 3).
        return [line for line in Path("/proc/self/mounts").read_text().splitlines() if str(tmp_path) in line]

    mounts_before = mounts_here()
    res = subprocess.run([sys.executable, "-m", "chaos", "run", "--dry-run", str(EXPERIMENTS),
                          "--runs-dir", str(tmp_path / "runs")], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "torch.distributed.run" in res.stdout or "torchrun" in res.stdout, res.stdout
    assert not (tmp_path / "runs").exists(), "a dry run wrote a run directory"
    assert mounts_here() == mounts_before
    assert not (tmp_path / "state" / "active").exists() or not list((tmp_path / "state" / "active").iterdir())
