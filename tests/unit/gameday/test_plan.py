"""Game-day plans: the seeded draw, the mix's rates, the mapping onto a target, and what a bad plan is told."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from chaos.errors import ExperimentError
from chaos.spec.load import load_experiment
from chaos.spec.mixes import CATEGORIES, LLAMA3_405B, play
from chaos.spec.gameday import GamedayConfig, describe, draw

REPO = Path(__file__).resolve().parents[3]


def plan(**kw) -> GamedayConfig:
    return GamedayConfig.model_validate({"gpus": 16384, "span_days": 1, "window_s": 100, **kw})


def test_the_llama3_table_adds_up_to_the_published_419() -> None:
    assert LLAMA3_405B.total == 419
    assert LLAMA3_405B.by_category()["gpu"] == 148 + 19 + 17 + 6 + 6
    assert {c.category for c in LLAMA3_405B.causes} == set(CATEGORIES)


def test_the_same_seed_draws_the_same_schedule_and_another_seed_another() -> None:
    a, b, c = (draw(plan(), seed, "local", nproc_per_node=2) for seed in (3, 3, 4))
    assert [(s.at_s, s.cause, s.fault) for s in a] == [(s.at_s, s.cause, s.fault) for s in b]
    assert [s.at_s for s in a] != [s.at_s for s in c]


def test_the_draw_follows_the_published_rate_at_the_stated_scale() -> None:
    p = plan(gpus=4096, span_days=4)
    expected = 419 * 4096 / 16384 * 4 / 54
    assert p.expected_faults() == pytest.approx(expected)
    counts = [len(draw(p, seed, "local")) for seed in range(300)]
    assert statistics.mean(counts) == pytest.approx(expected, rel=0.1)
    assert all(p.start_after_s <= s.at_s <= p.start_after_s + p.window_s for s in draw(p, 1, "local"))


def test_each_fault_waits_for_training_and_may_come_due_after_the_workload_ended() -> None:
    s = draw(plan(), 0, "local")[0]
    assert list(s.fault["trigger"]) == ["in_training"] and s.fault["optional"] is True
    assert s.fault["name"] == s.label and s.label.startswith(s.category)


def test_a_category_can_be_replaced_or_left_out() -> None:
    p = plan(categories={"gpu": {"scale": 0}, "software": {"fault": {"kind": "kill-rank", "rank": 0}}})
    schedule = draw(p, 0, "local")
    assert schedule and all(s.category != "gpu" for s in schedule)
    soft = [s for s in schedule if s.category == "software"]
    assert all(s.fault["kind"] == "kill-rank" and s.fault["rank"] == 0 and s.overridden for s in soft)


def test_node_faults_only_where_the_target_has_nodes() -> None:
    assert play("host", "local").fault["kind"] == "kill-rank"
    assert play("host", "netns", elastic=True).fault["kind"] == "kill-node"
    # Not elastic and no spare: a lost node would end the job, so the node's ranks die instead.
    assert play("host", "netns").fault == {"kind": "kill-rank", "rank": "all", "signal": "SIGKILL", "node": "node1"}
    assert play("host", "slurm").fault["kind"] == "kill-node"
    assert play("network", "local").fault["kind"] == "hang-rank"
    assert play("network", "docker").fault["kind"] == "partition"
    assert play("maintenance", "slurm").fault["kind"] == "preempt"
    assert play("gpu", "slurm").fault == {"kind": "xid", "code": 79, "sink": "file", "device": 0}


def test_the_smoke_plan_loads_and_its_dry_run_names_every_drawn_fault() -> None:
    exp = load_experiment(REPO / "experiments" / "gameday-smoke-ddp.yaml")
    assert exp.gameday is not None and exp.schedule
    assert [f.config.name for f in exp.faults[-len(exp.schedule):]] == [s.label for s in exp.schedule]
    assert {"fault_mix", "goodput"} <= {c.kind for c in exp.checks}
    text = "\n".join(describe(exp.gameday, exp.schedule, exp.target_kind))
    assert all(s.label in text for s in exp.schedule) and "compressed" in text


GOOD = """name: gd
workload: {script: workloads/ddp.py, nproc_per_node: 2}
target: local
gameday: {gpus: 16384, span_days: 0.5, window_s: 40%s}
"""


@pytest.mark.parametrize("extra, message", [
    (", mix: llama4", "unknown mix 'llama4'"),
    (", categories: {gpus: {scale: 2}}", "unknown category 'gpus'"),
    (", categories: {gpu: {fault: {kind: kill-rank, rnak: 1}}}", "unknown field for fault 'kill-rank'"),
    (", span_days: 3000", "expects"),
    # A category this seed never draws is still checked (half a day at 16,384 GPUs holds no host fault).
    (", categories: {host: {fault: {kind: kill-node, node: 1}}}", "needs nodes with their own addresses"),
    (", window_s: 0", "greater than 0"),
])
def test_a_broken_plan_is_refused_with_what_to_change(tmp_path: Path, extra: str, message: str) -> None:
    f = tmp_path / "gd.yaml"
    f.write_text(GOOD.replace("window_s: 40%s", "window_s: 40" + extra) if "window_s: 0" not in extra
                 else GOOD.replace("window_s: 40%s", extra.lstrip(", ")))
    (tmp_path / "workloads").mkdir()
    (tmp_path / "workloads" / "ddp.py").write_text("")
    with pytest.raises(ExperimentError) as exc:
        load_experiment(f)
    assert message in str(exc.value)
    assert len(exc.value.problems) == len({str(p) for p in exc.value.problems})  # each problem once


def test_silent_data_corruption_is_played_inside_the_step_on_a_drawn_rank() -> None:
    """The cause itself, not its category's crash: one high exponent bit of a weight on one rank of the job."""
    from chaos.spec.mixes import play_cause

    sdc = play_cause("Silent Data Corruption", "gpu", "local")
    assert sdc.fault["kind"] == "bitflip" and sdc.fault["bit"] == 30 and sdc.draws == ("rank",)
    assert play_cause("Faulty GPU", "gpu", "local").fault["kind"] == "kill-rank"
    drawn = [s for seed in range(30) for s in draw(plan(gpus=16384, span_days=10), seed, "local", nproc_per_node=2)
             if s.cause == "Silent Data Corruption"]
    assert drawn and all(s.fault["kind"] == "bitflip" and s.fault["rank"] in (0, 1) for s in drawn)
    assert {s.fault["rank"] for s in drawn} == {0, 1}


def test_an_elastic_jobs_drawn_rank_exists_after_it_lost_nodes() -> None:
    """Ranks are renumbered from 0 after each rendezvous: on 2 nodes of 2 ranks that may shrink to 1 node, a drawn
    rank is 0 or 1, never one that the shrunk job no longer has."""
    ranks = {s.fault["rank"] for seed in range(30)
             for s in draw(plan(gpus=16384, span_days=10), seed, "netns", nproc_per_node=2, nodes=2, elastic=True,
                           min_nodes=1) if s.cause == "Silent Data Corruption"}
    assert ranks == {0, 1}
    ranks = {s.fault["rank"] for seed in range(30)
             for s in draw(plan(gpus=16384, span_days=10), seed, "netns", nproc_per_node=2, nodes=2)
             if s.cause == "Silent Data Corruption"}
    assert ranks == {0, 1, 2, 3}


def test_a_torchft_host_loss_takes_one_replica_group_down_not_the_job() -> None:
    """On torchft a host is a replica group's: maintenance and host faults kill every rank of one drawn group (its
    node rg<k>), and over seeds each group is drawn; the other categories strike one process, as on one machine."""
    for category, signal in (("maintenance", "SIGTERM"), ("host", "SIGKILL")):
        played = play(category, "torchft")
        assert played.fault == {"kind": "kill-rank", "rank": "all", "signal": signal} and played.draws == ("group",)
    groups = {s.fault["node"] for seed in range(30)
              for s in draw(plan(gpus=16384, span_days=10), seed, "torchft", nproc_per_node=1, nodes=3)
              if s.category in ("maintenance", "host")}
    assert groups == {"rg0", "rg1", "rg2"}
    assert play("gpu", "torchft").fault == {"kind": "kill-rank", "rank": "random", "signal": "SIGKILL"}


def test_a_torchft_plan_draws_over_its_replica_groups(tmp_path: Path) -> None:
    exp = tmp_path / "gd.yaml"
    exp.write_text("name: gd\nworkload: {script: workloads/torchft_ddp.py, nproc_per_node: 1}\n"
                   "target: {kind: torchft, replica_groups: 3}\n"
                   "gameday: {mix: llama3-405b, gpus: 16384, span_days: 20, window_s: 60}\nseed: 1\n")
    nodes = {s.fault.get("node") for s in load_experiment(exp).schedule if s.category in ("maintenance", "host")}
    assert nodes and nodes <= {"rg0", "rg1", "rg2"} and len(nodes) > 1


def test_a_torchft_plan_that_waits_for_its_groups_says_so_in_every_trigger(tmp_path: Path) -> None:
    """wait_for_groups_s: each drawn fault waits for every replica group (up to the bound); the draw is unchanged."""
    body = ("name: gd\nworkload: {script: workloads/torchft_ddp.py, nproc_per_node: 1}\n"
            "target: {kind: torchft, replica_groups: 3}\n"
            "gameday: {mix: llama3-405b, gpus: 16384, span_days: 20, window_s: 60%s}\nseed: 1\n")
    plain, waiting = tmp_path / "plain.yaml", tmp_path / "waiting.yaml"
    plain.write_text(body % "")
    waiting.write_text(body % ", wait_for_groups_s: 90")
    a, b = load_experiment(plain), load_experiment(waiting)
    assert [(s.at_s, s.cause) for s in a.schedule] == [(s.at_s, s.cause) for s in b.schedule]
    assert all("groups" not in s.fault["trigger"]["in_training"] for s in a.schedule)
    assert all(s.fault["trigger"]["in_training"]["groups"] == 3 and
               s.fault["trigger"]["in_training"]["groups_wait_s"] == 90 for s in b.schedule)
    assert any("every replica group" in line for line in describe(b.gameday, b.schedule, "torchft"))
    # Validated and written back (journal, dry run): a plan without the option reads exactly as before it existed.
    assert a.faults and all("groups" not in f.trigger.describe() for f in a.faults)
    assert all('"groups":3,"groups_wait_s":90' in f.trigger.describe() for f in b.faults)


def test_waiting_for_groups_is_refused_off_torchft(tmp_path: Path) -> None:
    exp = tmp_path / "gd.yaml"
    exp.write_text("name: gd\nworkload: {script: workloads/ddp.py, nproc_per_node: 2}\n"
                   "gameday: {mix: llama3-405b, gpus: 1024, window_s: 60, wait_for_groups_s: 30}\nseed: 1\n")
    with pytest.raises(ExperimentError, match="wait_for_groups_s"):
        load_experiment(exp)
