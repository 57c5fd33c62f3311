"""The slurm target's local cluster leaves nothing behind: not on Ctrl-C, and not after a SIGKILLed harness + chaos cleanup.

The workload is the torch-free agent (tests/fixtures/fake_torchrun.py) on each node, so what is
timed is the cluster and the job, not torch's start-up; experiments/slurm-*.yaml run the real one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from chaos.runtime.ledger import Ledger
from chaos.runtime.network import short_id
from chaos.runtime.safety import find_leftovers
from chaos.slurm.minicluster import missing_commands, state_root

ROOT = Path(__file__).resolve().parents[2]
FAKE_TORCHRUN = ROOT / "tests" / "fixtures" / "fake_torchrun.py"

pytestmark = [
    pytest.mark.integration, pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="the slurm target needs root (network namespaces): "
                       "run as root, or in CI (.ci/run)"),
    pytest.mark.skipif(bool(missing_commands()), reason=f"needs {', '.join(missing_commands())}: "
                       "bash scripts/setup.sh as root installs slurm-wlm and munge"),
]


def _experiment(tmp: Path) -> Path:
    doc = {
        "name": "slurm-safety",
        "workload": {"command": [sys.executable, str(FAKE_TORCHRUN), "--nproc", "1", "--max-restarts", "3",
                                 "--steps", "100000", "--ckpt-every", "5", "--step-sleep", "0.05"]},
        "target": {"kind": "slurm", "nodes": 2},
        "checks": [], "timeout_s": 600, "seed": 0,
    }
    path = tmp / "slurm-safety.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


class Run:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.env = {**os.environ, "CHAOS_STATE_DIR": str(tmp / "state"), "PYTHONUNBUFFERED": "1"}
        self.out = open(tmp / "harness.out", "w+b")
        self.proc = subprocess.Popen([sys.executable, "-m", "chaos", "run", str(_experiment(tmp)), "--runs-dir",
                                      str(tmp / "runs")], cwd=tmp, env=self.env, stdout=self.out,
                                     stderr=subprocess.STDOUT)
        self.run_dir: Path | None = None

    def output(self) -> str:
        self.out.flush()
        return (self.tmp / "harness.out").read_text(errors="replace")

    def wait_running(self, timeout_s: float = 120) -> Path:
        """Until the job runs and both nodes' workers have spawned (seen by the harness)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            logs = sorted((self.tmp / "runs").glob("*/harness.jsonl"))
            if logs:
                self.run_dir = logs[0].parent
                recs = [json.loads(x) for x in logs[0].read_text().splitlines() if x.strip()]
                running = any(r.get("ev") == "slurm_job" and r.get("state") == "RUNNING" for r in recs)
                nodes = {r.get("node") for r in recs if r.get("ev") == "worker_spawn"}
                if running and nodes >= {"node0", "node1"}:
                    return self.run_dir
            if self.proc.poll() is not None:
                pytest.fail(f"chaos run exited {self.proc.returncode} before the job ran:\n{self.output()[-3000:]}")
            time.sleep(0.2)
        pytest.fail(f"the Slurm job did not run on both nodes within {timeout_s:g} s:\n{self.output()[-3000:]}")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.run_dir is not None:
            subprocess.run([sys.executable, "-m", "chaos", "cleanup", "--force", str(self.run_dir)], cwd=self.tmp,
                           env=self.env, capture_output=True, timeout=180)
        self.out.close()


def _slurm_processes(run_dir: Path) -> list[str]:
    """Daemons started for this run: their command line names its slurm.conf or its state directory."""
    marks = (str(run_dir.resolve() / "slurm"), str(state_root(short_id(run_dir))))
    out = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        line = " ".join(p.info["cmdline"] or [])
        if any(m in line for m in marks):
            out.append(f"{p.pid}: {line[:160]}")
    return out


def _assert_nothing_left(run_dir: Path) -> None:
    left = [f"{x.kind}: {x.what}" for x in find_leftovers(run_dir)]
    left += [f"slurm daemon {p}" for p in _slurm_processes(run_dir)]
    if state_root(short_id(run_dir)).exists():
        left.append(f"state directory {state_root(short_id(run_dir))}")
    assert not left, "left behind:\n" + "\n".join(left)
    assert Ledger(run_dir).closed


@pytest.fixture
def slurm_run(tmp_path: Path):
    runs: list[Run] = []

    def start() -> Run:
        r = Run(tmp_path)
        runs.append(r)
        return r

    yield start
    for r in runs:
        r.close()


def test_ctrl_c_tears_the_cluster_down(slurm_run) -> None:
    r = slurm_run()
    run_dir = r.wait_running()
    assert _slurm_processes(run_dir), "no daemon of the run is up: the check below would prove nothing"
    scripts = [run_dir / "slurm-job.sh", run_dir / "slurm-node.sh"]
    assert all(p.exists() for p in scripts), "the job's scripts must stay in the run directory"
    r.proc.send_signal(signal.SIGINT)
    assert r.proc.wait(timeout=90) != 0, f"an interrupted run must not pass:\n{r.output()[-2000:]}"
    _assert_nothing_left(run_dir)
    recs = [json.loads(x) for x in (run_dir / "harness.jsonl").read_text().splitlines() if x.strip()]
    up = [x for x in recs if x.get("ev") == "slurm_cluster_up"]
    assert up and up[0]["seconds"] < 20, f"the local cluster must start in seconds: {up}"
    assert any(x.get("ev") == "slurm_submit" and x.get("job_id") for x in recs)


def test_sigkilled_harness_then_cleanup_leaves_nothing(slurm_run) -> None:
    r = slurm_run()
    run_dir = r.wait_running()
    r.proc.send_signal(signal.SIGKILL)
    r.proc.wait(timeout=30)
    assert _slurm_processes(run_dir), "the cluster died with the harness: nothing left for cleanup to prove"
    res = subprocess.run([sys.executable, "-m", "chaos", "cleanup", str(run_dir)], cwd=r.tmp, env=r.env,
                         capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, f"chaos cleanup failed:\n{res.stdout}\n{res.stderr}"
    _assert_nothing_left(run_dir)


def test_a_workload_that_does_not_save_on_sigterm_fails_saved_on_preempt_naming_the_lost_steps(tmp_path: Path) -> None:
    """The reference workload passes experiments/slurm-preempt-fsdp.yaml; this fixture has no SIGTERM
    handler, dies of the preemption notice, and loses the steps since its last periodic checkpoint."""
    from chaos.spec.load import load_experiment
    from chaos.run.runner import Runner

    doc = yaml.safe_load((ROOT / "experiments" / "slurm-preempt-fsdp.yaml").read_text())
    doc.update(name="slurm-preempt-deaf", timeout_s=180)
    doc["workload"]["script"] = str(ROOT / "tests" / "fixtures" / "workloads" / "ddp_no_sigterm_save.py")
    doc["checks"] = [{"completes": {"min_restarts": 1}}, {"saved_on_preempt": {}}]
    # Just after the step-20 save: Slurm's SIGTERM (on its next scheduling pass) lands before the
    # step-30 one. Landing right after a periodic save would lose nothing and prove nothing
    # (saved_on_preempt is then INCONCLUSIVE: seen once in CI with the trigger at step 25).
    doc["faults"][0]["trigger"] = {"at_step": 21}
    path = tmp_path / "deaf.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    report = Runner(load_experiment(path), runs_root=tmp_path / "runs", golden=None).run()
    v = {r.kind: r for r in report.checks}
    detail = "\n".join(f"{r.kind}: {r.verdict} {r.reason}" for r in report.checks)
    assert v["completes"].verdict == "pass", detail  # it did recover, from its last periodic checkpoint
    saved = v["saved_on_preempt"]
    assert saved.verdict == "fail", detail
    assert "step(s) lost" in saved.reason and "ran twice" in saved.reason, detail
    figs = saved.figures["preempt#0"]
    assert figs["lost_steps"] > 0 and figs["resumed_from_step"] in (20, 30), detail
    assert f"steps {figs['resumed_from_step'] + 1}..{figs['last_step']}" in saved.reason, detail
    # The fixture wrote attempt 0.0 in the requeued job too: judged as the launch the harness saw it in.
    from chaos.evidence.events import History

    starts = History.from_run_dir(report.run_dir).of("start")
    requeued = [r for r in starts if r.get("attempt_reported") == "0.0"]
    assert requeued and all(str(r["attempt"]).startswith("1.") for r in requeued), starts
    assert figs["attempt"] == "0.0", detail
    assert report.exit_code == 1
    _assert_nothing_left(report.run_dir)


@pytest.mark.parametrize("saves", [True, False], ids=["saves-on-sigterm", "ignores-sigterm"])
def test_a_handwritten_script_that_writes_its_hostname_and_keeps_its_label_is_judged_right(tmp_path: Path,
                                                                                         saves: bool) -> None:
    """Issue 56 item 1: a user's script that writes the protocol by hand (``host`` is ``socket.gethostname()``,
    which every node of the local cluster shares, and the requeued job writes attempt 0.0 again) is preempted
    between two saves. Its records are placed by the worker the harness saw spawn with their pid, so the requeue
    is a restart of launch 1 and the preemption is judged: a script that saves on SIGTERM PASSes, one that
    ignores it FAILs naming the lost steps (before, both were INCONCLUSIVE: 'attempt 0.0 finished its training
    before the preemption took it')."""
    import socket

    from chaos.evidence.events import History
    from chaos.run.runner import Runner
    from chaos.spec.load import load_experiment

    doc = yaml.safe_load((ROOT / "experiments" / "slurm-preempt-fsdp.yaml").read_text())
    doc.update(name=f"slurm-preempt-handwritten-{'saves' if saves else 'deaf'}", timeout_s=180)
    doc["workload"]["script"] = str(ROOT / "tests" / "fixtures" / "workloads" / "handwritten_host.py")
    # "false" as text: workload.args passes a False as no flag at all (store_true's convention), which leaves a flag
    # whose default is true on.
    doc["workload"]["args"] = {"steps": 40, "ckpt_every": 20, "seed": 0, **({} if saves else {"save_on_sigterm": "false"})}
    doc["checks"] = [{"completes": {"min_restarts": 1, "max_restarts": 1}}, {"saved_on_preempt": {}}]
    doc["faults"][0]["trigger"] = {"at_step": 21}  # just after the step-20 save (see the test above)
    path = tmp_path / "handwritten.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    report = Runner(load_experiment(path), runs_root=tmp_path / "runs", golden=None).run()
    v = {r.kind: r for r in report.checks}
    detail = "\n".join(f"{r.kind}: {r.verdict} {r.reason}" for r in report.checks)
    history = History.from_run_dir(report.run_dir)
    starts = history.of("start")
    nodes = {str(r.get("node")) for r in history.of("worker_spawn")}
    assert {r.get("host_reported") for r in starts} == {socket.gethostname()}, starts
    assert {str(r["host"]) for r in starts} <= nodes, (starts, nodes)
    # The requeued job wrote attempt 0.0 again: judged as the launch the harness saw its workers in.
    requeued = [r for r in starts if r.get("attempt_reported") == "0.0"]
    assert requeued and all(str(r["attempt"]).startswith("1.") for r in requeued), starts
    assert v["completes"].verdict == "pass", detail
    saved = v["saved_on_preempt"]
    if saves:
        assert saved.verdict == "pass", detail
        assert report.exit_code == 0, detail
    else:
        assert saved.verdict == "fail", detail
        figs = saved.figures["preempt#0"]
        assert figs["lost_steps"] > 0 and "step(s) lost" in saved.reason, detail
        assert f"steps {figs['resumed_from_step'] + 1}..{figs['last_step']}" in saved.reason, detail
    _assert_nothing_left(report.run_dir)
