"""``cluster: existing`` against a real Slurm cluster the run does not own.

A one-node cluster on the host's own network (chaos.slurm.minicluster.standalone_spec) stands in for
a user's staging cluster: the harness gets only its slurm.conf, submits with partition and time,
finds the ranks through ``srun --overlap --jobid`` steps (it has no process tree of theirs), and must
leave another user's job and the node alone.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest
import yaml

from chaos.runtime.context import HarnessLog, RunContext
from chaos.errors import CapabilityError
from chaos.runtime.ledger import Ledger
from chaos.runtime.shell import Shell
from chaos.slurm.minicluster import MiniCluster, free_port, missing_commands, standalone_spec

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.integration, pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="starting the stand-in cluster's slurmd needs root: "
                       "run as root, or in CI (.ci/run)"),
    pytest.mark.skipif(bool(missing_commands()), reason=f"needs {', '.join(missing_commands())}: "
                       "bash scripts/setup.sh as root installs slurm-wlm and munge"),
]


@pytest.fixture(scope="module")
def staging(tmp_path_factory):
    """The stand-in cluster, with a held job of 'another user' on it; yields (slurm.conf, its control, that job)."""
    root = tmp_path_factory.mktemp("staging")
    log = HarnessLog(root / "harness.jsonl")
    run = RunContext(experiment=None, run_dir=root, ckpt_dir=root / "ckpt", ledger=Ledger(root),  # type: ignore[arg-type]
                     shell=Shell(log), log=log, rng=random.Random(0))
    run.ledger.open(dirs=[root])
    spec = standalone_spec(root, f"staging{os.getpid()}", node=f"stage{os.getpid() % 1000}")
    cluster = MiniCluster(run, spec, spec.logs / "slurm.conf", switch_ns=None)
    try:
        cluster.start()
        other = cluster.control.submit(None, options=["--hold", "--job-name=someone-else", "--wrap", "sleep 600"])
        yield cluster.conf, cluster.control, other
    finally:
        failures = run.ledger.revert(run.shell)
        assert not failures, failures


def _experiment(tmp: Path, conf: Path, faults: list[dict], checks: list[dict], **target) -> Path:
    doc = {
        "name": "slurm-existing",
        "workload": {"script": str(ROOT / "workloads" / "ddp.py"), "nproc_per_node": 2, "max_restarts": 3,
                     "args": {"steps": 40, "ckpt_every": 10, "seed": 0}},
        "target": {"kind": "slurm", "cluster": "existing", "conf": str(conf), "nodes": 1, "partition": "chaos",
                   "time": "00:10:00", "shared_dir": str(tmp), "rdzv_port": free_port(), **target},
        "faults": faults, "checks": checks, "timeout_s": 240, "seed": 0,
    }
    path = tmp / "existing.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _run(path: Path, tmp: Path):
    from chaos.spec.load import load_experiment
    from chaos.run.runner import Runner

    return Runner(load_experiment(path), runs_root=tmp / "runs", golden=None).run()


def test_rank_faults_act_through_srun_steps_and_the_job_recovers(staging, tmp_path: Path) -> None:
    conf, ctl, other = staging
    faults = [{"kind": "straggler", "rank": 0, "duration_s": 3, "trigger": {"at_step": 5}},
              {"kind": "hang-rank", "rank": 1, "duration_s": 2, "trigger": {"at_step": 12}},
              {"kind": "kill-rank", "rank": 1, "trigger": {"at_step": 20}}]
    path = _experiment(tmp_path, conf, faults, [{"completes": {"min_restarts": 1, "max_restarts": 1}},
                                                {"exactly_once": {}}, {"checkpoint_integrity": {}}])
    report = _run(path, tmp_path)
    detail = "\n".join(f"{r.kind}: {r.verdict} {r.reason}" for r in report.checks)
    assert report.exit_code == 0, detail
    straggler, hang, kill = json.loads((report.run_dir / "journal.json").read_text())["faults"]
    assert straggler["error"] is None and straggler["revert_errors"] == [], straggler
    assert hang["error"] is None and hang["revert_errors"] == [] and len(hang["details"]["pids"]) == 1, hang
    assert kill["error"] is None and len(kill["details"]["pids"]) == 1, kill
    assert kill["recovery"]["resume_s"] is not None, kill
    harness = [json.loads(line) for line in (report.run_dir / "harness.jsonl").read_text().splitlines()]
    # The ranks were found, slowed and killed by steps inside the job's allocation, not through a process tree.
    steps = [r for r in harness if r["ev"] == "cmd" and "chaos.slurm.steps" in r.get("argv", [])]
    assert {r["argv"][r["argv"].index("chaos.slurm.steps") + 1] for r in steps} >= {"list", "signal"}, steps
    assert all("--overlap" in r["argv"] for r in steps)
    # The hang was released by a SIGCONT step on the node (the ledger's undo), as was the straggler.
    sent = [r["argv"][r["argv"].index("signal") + 2] for r in steps if "signal" in r["argv"]]
    assert "SIGSTOP" in sent and sent.count("SIGCONT") >= 2 and "SIGKILL" in sent, sent  # hang + straggler undo
    [cycles] = [r for r in harness if r["ev"] == "straggler_cycles"]
    assert cycles["cycles"][0] and cycles["cycles"][0] > 0, cycles  # the duty-cycle step ran on the node
    assert "--partition=chaos" in (report.run_dir / "slurm-job.sh").read_text()
    # Someone else's job is untouched: still there, still held; the run's own job is gone.
    state = ctl.job(other)
    assert state is not None and state.state == "PENDING", state
    assert ctl.run("squeue", "-h", "-o", "%i", check=False).stdout.split() == [other]


@pytest.mark.parametrize("fault, needs", [
    ({"kind": "kill-node", "node": 0}, "root on a compute node"),
    ({"kind": "partition", "nodes": [0]}, "network namespace"),
    ({"kind": "preempt"}, "preempt_partition"),
])
def test_what_would_touch_the_cluster_is_refused_before_launch(staging, tmp_path: Path, fault, needs) -> None:
    conf, ctl, _ = staging
    fault = {**fault, "trigger": {"at_step": 5}}
    before = ctl.run("squeue", "-h", "-o", "%i", check=False).stdout.split()
    with pytest.raises(CapabilityError, match=needs):
        _run(_experiment(tmp_path, conf, [fault], [{"completes": {}}]), tmp_path)
    assert ctl.run("squeue", "-h", "-o", "%i", check=False).stdout.split() == before  # nothing submitted


def test_a_run_directory_off_the_shared_filesystem_is_refused(staging, tmp_path: Path) -> None:
    conf, _, _ = staging
    shared = tmp_path / "shared"
    shared.mkdir()
    with pytest.raises(CapabilityError, match="not inside target.shared_dir"):
        _run(_experiment(tmp_path, conf, [], [{"completes": {}}], shared_dir=str(shared)), tmp_path)
