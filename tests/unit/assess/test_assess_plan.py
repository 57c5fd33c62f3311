"""The battery chaos assess plans from what it saw: each trigger where it bites, each check only where its evidence can
exist, and every experiment it writes valid."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import yaml

from chaos.assess.job import Job
from chaos.assess.observe import Observation
from chaos.assess.plan import Options, plan
from chaos.spec.load import load_experiment

ROOT = Path(__file__).resolve().parents[3]


def seen(**kw) -> Observation:
    base = Observation(run_dir="/r/x", exit_code=0, timed_out=False, wall_s=20.0, speaks_protocol=True, world_size=2,
                       final_step=60, step_s=0.07, step_s_how="median", startup_s=12.0, saves=[10, 20, 30, 40, 50, 60],
                       save_s=0.09, ckpt_paths=["/r/x/ckpt/step-10"], samples_traced=True, digests=True)
    return replace(base, **kw)


def by_name(probes):
    return {p.name: p for p in probes}


def test_a_protocol_job_gets_each_fault_where_it_bites() -> None:
    p = by_name(plan(seen(), Options(root=True)))
    kill = p["rank-kill"]
    assert kill.faults[0]["trigger"] == {"at_step": 25} and "between the saves at steps 20 and 30" in kill.placed
    kinds = [next(iter(c)) for c in kill.checks]
    assert kinds == ["completes", "recovery_time", "exactly_once", "checkpoint_integrity", "matches_golden"]
    save = p["kill-during-save"].faults[0]["trigger"]
    assert save == {"on_event": {"on_event": "ckpt_begin", "nth": 2}, "delay_s": 0.045}
    assert p["storage-full"].faults[0]["trigger"] == {"at_step": 19}
    assert p["hang"].faults[0]["duration_s"] == 30.0 and {"detection": {"max_s": 29.0}} in p["hang"].checks
    assert not p["preempt"].runs and not p["node-lost"].runs and "multi-node" in p["node-lost"].skip


def test_a_job_that_only_prints_is_never_held_to_evidence_it_cannot_give() -> None:
    quiet = seen(speaks_protocol=False, saves=[], save_s=None, ckpt_paths=[], samples_traced=False, digests=False,
                 files=["work/snapshot.pt"], ckpt_dir="{run_dir}/work", final_step=30)
    p = by_name(plan(quiet, Options(root=True)))
    assert [next(iter(c)) for c in p["rank-kill"].checks] == ["completes", "checkpoint_integrity"]
    assert p["rank-kill"].faults[0]["trigger"] == {"at_step": 15}
    for name in ("kill-during-save", "corrupt-newest", "storage-full"):
        assert not p[name].runs and p[name].skip.startswith("not run:"), name


def test_no_step_seen_places_by_time_and_no_root_skips_the_mount() -> None:
    blind = seen(speaks_protocol=False, saves=[], final_step=0, samples_traced=False, digests=False)
    p = by_name(plan(blind, Options(root=False)))
    assert p["rank-kill"].faults[0]["trigger"] == {"after_s": 16.0}
    assert "needs root" in by_name(plan(seen(), Options(root=False)))["storage-full"].skip


def test_a_run_that_was_no_reference_runs_nothing_and_says_why() -> None:
    probes = plan(seen(problem="the job exited 1 without any fault"), Options(root=True))
    assert not any(p.runs for p in probes)
    assert all("exited 1" in p.skip or p.name in ("preempt", "node-lost") for p in probes)


def test_only_runs_what_was_asked() -> None:
    p = by_name(plan(seen(), Options(root=True, only=("nan",))))
    assert [n for n, x in p.items() if x.runs] == ["nan"] and p["rank-kill"].skip == "not asked for (--only)"


def test_every_planned_experiment_is_a_valid_experiment_file(tmp_path: Path) -> None:
    job = Job.of(["workloads/ddp.py"], args=["steps=60", "ckpt_every=10"], cwd=ROOT)
    folder = tmp_path / "experiments"
    folder.mkdir()
    for observation in (seen(), seen(speaks_protocol=False, saves=[], samples_traced=False, digests=False,
                                     step_regex=r"step (?P<step>\d+)")):
        for p in plan(observation, Options(root=True)):
            if not p.runs:
                continue
            doc = {"name": f"ddp-{p.name}", "workload": job.workload(experiments_dir=folder,
                                                                      step_regex=observation.step_regex),
                   "target": "local", "faults": p.faults, "checks": p.checks, "timeout_s": p.timeout_s}
            exp = load_experiment(folder / f"{p.name}.yaml", yaml.safe_dump(doc, sort_keys=False))
            assert exp.faults and exp.checks, p.name


def test_a_quick_save_is_struck_on_a_disk_slowed_to_write_it_in_seconds() -> None:
    p = by_name(plan(seen(save_bytes=210_000), Options(root=True)))["kill-during-save"]
    slow, kill = p.faults
    assert slow == {"kind": "slow-storage", "write_mbps": 0.105, "trigger": {"at_step": 11}}
    assert kill["trigger"] == {"on_event": {"on_event": "ckpt_begin", "nth": 2}, "delay_s": 1.0}
    # Without root there is no mount: the kill is timed on the save as measured, and may miss it (then "not tested").
    timed = by_name(plan(seen(save_bytes=210_000), Options(root=False)))["kill-during-save"]
    assert [f["kind"] for f in timed.faults] == ["kill-rank"]
