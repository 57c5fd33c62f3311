"""The checks against generated lies (issue 32): a history with known truth PASSes every check that
applies to it, and no mutation that breaks a check's promise is ever PASSed by that check.

Seeded and reproducible (``derandomize``): the same examples on every run and every machine, so a
red CI run is a red run here. ``python tests/unit/checks/mutations.py`` prints the same matrix this
file prints on failure.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mutations import (OPERATORS, PROTOCOL, SAMPLES, hosts_renamed, judged, matrix, on_two_nodes, render,
                       script_keeps_its_label, unseen_worker_with_a_seen_pid, verdict_of)
from truth import CONFIGS, SCENARIOS, Params, play

from chaos.registry import CHECKS

PROPERTY = settings(derandomize=True, deadline=None, max_examples=30, database=None,
                    suppress_health_check=[HealthCheck.too_slow])

NOT_SIMULATED = {
    "no_orphans": "judges the host's process and namespace listings, not the history (tests/unit/checks/test_no_orphans.py)",
    "health_action": "judges a monitor's health events against XID faults (test_health_action.py)",
    "straggler_named": "judges straggler alerts against straggler faults (test_straggler_named.py)",
    "struck_mid_save": "judges a kill's timing against a save in flight (test_struck_mid_save.py)",
    "saved_on_preempt": "judges a SIGTERM save against a preemption (test_saved_on_preempt.py)",
    "fault_mix": "judges which fault families fired in a game day (test_fault_mix.py)",
    "survivor_progress": "judges a drop-replica job's replica groups, which the simulator's DDP job has none of "
                         "(test_replica_groups.py)",
    "replicas_converge": "judges a drop-replica job's heals and per-step weight checksums (test_replica_groups.py)",
    "drop_replica_samples": "judges a drop-replica job's (group, step) shares of the data (test_replica_groups.py)",
    "restarted_in_process": "judges in-process restarts (inprocess_restart events) against the processes the harness "
                            "saw, which the simulator's restarts never are (test_restarted_in_process.py)",
    "save_fails_together": "judges the filesystem's failed writes (a write-error fault's slowfs record) against the "
                           "saves and the ranks' progress (test_save_fails_together.py)",
    "kube_recovered": "judges the containers the harness saw a Kubernetes node run before and after a pod, container "
                      "or node fault (test_kube_recovered.py)",
}
"""Checks whose evidence the simulator does not play, and where their lies are tested instead. A new
check must join ``truth.CONFIGS`` or this list: it cannot be left out of the method by accident."""


@st.composite
def jobs(draw: st.DrawFn, scenario: str | None = None) -> Params:
    """A job the simulator can play: the fault after the first commit (the second, for a corruption
    whose restart must fall back to an older checkpoint), at most at the last step."""
    scenario = scenario or draw(st.sampled_from(SCENARIOS))
    world = draw(st.integers(2, 3))
    batch = draw(st.integers(1, 3))
    dataset = draw(st.integers(world * batch * 2, 40))
    steps = draw(st.integers(6, 16))
    ckpt_every = draw(st.integers(2, steps // 3 if scenario == "corrupt" else steps // 2))
    first = 2 * ckpt_every if scenario == "corrupt" else ckpt_every
    fault_at = draw(st.integers(first, steps - 1 if scenario == "nan" else steps))
    return Params(scenario=scenario, world=world, dataset=dataset, batch=batch, steps=steps, ckpt_every=ckpt_every,
                  fault_at=fault_at, seed=draw(st.integers(0, 50)), epoch_base=draw(st.integers(0, 1)),
                  rollback=draw(st.sampled_from(("restart", "in_process"))) if scenario == "nan" else "restart")


def test_every_check_is_simulated_or_says_where_its_lies_are_tested() -> None:
    kinds = set(CHECKS.kinds())
    assert kinds == set(CONFIGS) | set(NOT_SIMULATED), kinds ^ (set(CONFIGS) | set(NOT_SIMULATED))
    assert not set(CONFIGS) & set(NOT_SIMULATED)


@pytest.mark.parametrize("scenario", SCENARIOS)
@PROPERTY
@given(data=st.data())
def test_the_truth_passes_every_check_that_applies(scenario: str, data: st.DataObject) -> None:
    params = data.draw(jobs(scenario))
    truth = play(params)
    for kind, config in judged(params).items():
        result = verdict_of(kind, config, truth)
        if _unprovable(params, kind, result.reason, truth):
            assert result.verdict == "inconclusive", result.reason
            continue
        assert result.verdict == "pass", f"{params}: {kind} {result.verdict.upper()}: {result.reason}"


def _unprovable(params: Params, kind: str, reason: str, truth) -> bool:
    """Where the evidence cannot prove a correct run, and the check must say so rather than PASS: after a
    world-size change the run consumes faster than the fault-free run it is compared with, and past the
    golden run's end in an epoch it resumed into and did not finish, no order is known to judge its gaps."""
    if kind != "exactly_once" or params.scenario != "resize":
        return False
    golden_seen = sum(len(b) for b in truth.golden["epoch_samples"].values())
    run_seen = len({(r["epoch"], i) for r in truth.records if r.get("ev") == "step" and r["attempt"] == "0.1"
                    for i in r["samples"]}) + sum(len(r["samples"]) for r in truth.records
                                                  if r.get("ev") == "step" and r["attempt"] == "0.0"
                                                  and r["step"] <= truth.resumed_from)
    return run_seen > golden_seen and "the golden run only" in reason


@pytest.mark.parametrize("name", sorted(OPERATORS), ids=lambda n: f"{n}[{OPERATORS[n].item}]")
@PROPERTY
@given(params=jobs())
def test_no_check_passes_a_lie_that_breaks_its_promise(name: str, params: Params) -> None:
    op = OPERATORS[name]
    lie = op.apply(play(params))
    if lie is None:
        return  # the lie does not apply to this job (another scenario's)
    for kind, config in judged(params).items():
        if kind not in op.breaks:
            continue
        result = verdict_of(kind, config, lie)
        assert result.verdict != "pass", f"{name} ({op.doc}) in {params}: {kind} PASSED: {result.reason}"
        # A lie is a finding, never a crash of the check (a harness ERROR hides the finding).
        assert result.verdict != "error", f"{name} in {params}: {kind} crashed: {result.reason}"


@PROPERTY
@given(params=jobs())
def test_a_restart_that_never_started_has_no_restart_s(params: Params) -> None:
    """Issue 32 item 13, judged as the experiment that promises it: a bounded restart_s. ``truth.CONFIGS`` judges
    recovery_time by resume_s, which the lie breaks whatever restart_s says; this holds restart_s itself."""
    config = {"metric": "restart_s", "max_s": 60}
    assert verdict_of("recovery_time", config, play(params)).verdict == "pass"
    lie = OPERATORS["restart_never_started"].apply(play(params))
    assert lie is not None
    result = verdict_of("recovery_time", config, lie)
    assert result.verdict == "fail", f"{params}: restart_s {result.verdict.upper()}: {result.reason}"


@pytest.mark.parametrize("scenario", SCENARIOS)
@PROPERTY
@given(data=st.data())
def test_a_script_that_keeps_its_label_is_judged_as_the_rounds_the_harness_saw(scenario: str,
                                                                                data: st.DataObject) -> None:
    """Issue 32 item 19, the one attempt rule as a metamorphic property: a script that writes attempt 0.0 in
    the restart too (``script_keeps_its_label``, no lie) gets every verdict the truth gets, because the history
    relabels each process to the round the harness saw it spawn in (``History.align_attempts``)."""
    params = replace(data.draw(jobs(scenario)), rollback="restart")  # the property is about a restart's label
    truth = play(params)
    same = script_keeps_its_label(truth)
    assert {r.get("attempt") for r in same.records if r.get("ev") == "start"} == {"0.0"}, "the rewrite did nothing"
    history = same.history()  # as the runner reads it: from_run_dir aligns the attempts
    assert {r["attempt"] for r in history.of("start")} == {"0.0", "0.1"}
    assert [f.recovery for f in same.outcome().faults] == [f.recovery for f in truth.outcome().faults]
    for kind, config in judged(params).items():
        want, got = verdict_of(kind, config, truth), verdict_of(kind, config, same)
        assert got.verdict == want.verdict, (f"{params}: {kind} {got.verdict.upper()} ({got.reason}) where the "
                                             f"truth got {want.verdict.upper()} ({want.reason})")


HOST_NAMES = {"as the harness names the nodes": None,
              "fully qualified": lambda node: f"{node}.cluster.example.org",
              "one hostname for every node": lambda node: "box"}


@pytest.mark.parametrize("hosts", HOST_NAMES)
@pytest.mark.parametrize("scenario", SCENARIOS)
@settings(PROPERTY, max_examples=5)  # 15 parametrizations: 75 jobs of every shape, each judged three ways
@given(data=st.data())
def test_verdicts_do_not_depend_on_the_host_string_a_rank_writes(hosts: str, scenario: str,
                                                                 data: st.DataObject) -> None:
    """Issue 56 item 1, a metamorphic property over every simulated check: a job whose ranks write another name
    for their node than the harness's (a user's script writing ``socket.gethostname()``: fully qualified, or the
    one hostname all the local Slurm cluster's nodes share) gets every verdict and every recovery figure the
    truth gets, also when the script keeps one attempt label across the restart, because the history places each
    record by the worker the harness saw spawn with its pid (``History.node_of``), whatever host it wrote."""
    params = replace(data.draw(jobs(scenario)), rollback="restart")
    truth = play(params)
    split = on_two_nodes(truth)
    rename = HOST_NAMES[hosts]
    variant = hosts_renamed(split, rename) if rename else split
    same = script_keeps_its_label(variant)
    history = same.history()
    assert {r["attempt"] for r in history.of("start")} == {r["attempt"] for r in truth.history().of("start")}
    assert {(r["rank"] % 2, r["host"]) for r in history.of("start")} <= {(0, "n0"), (1, "n1")}, \
        "a rank's records were not placed on the node the harness saw its worker spawn on"
    want_recovery = [f.recovery for f in truth.outcome().faults]
    wants = {kind: verdict_of(kind, config, truth) for kind, config in judged(params).items()}
    for lie_free in (variant, same):
        assert [f.recovery for f in lie_free.outcome().faults] == want_recovery
        for kind, config in judged(params).items():
            want, got = wants[kind], verdict_of(kind, config, lie_free)
            assert got.verdict == want.verdict, (f"{params} ({hosts}): {kind} {got.verdict.upper()} ({got.reason}) "
                                                 f"where the truth got {want.verdict.upper()} ({want.reason})")


def test_a_pid_the_harness_saw_on_two_nodes_is_not_guessed() -> None:
    """Issue 56 item 1: a pid the harness saw spawn on two nodes (pods with PID namespaces of their own) could be
    either node's worker: a record naming neither node keeps what it wrote (attempt and host), where a pid seen on one
    node places the record there under the name that node's workers write. A name that could be another machine's
    process with a colliding pid is not guessed either (tests/unit/checks/test_restarted_in_process_lies.py L04)."""
    from chaos.evidence.events import History

    spawn = {"ev": "worker_spawn", "source": "harness", "worker_pid": 7, "rank": 0, "generation": 0, "t": 1.0}
    step = {"ev": "step", "pid": 7, "host": "box", "rank": 0, "attempt": "0.0", "step": 1, "t": 2.0}
    one = History([{**spawn, "node": "n0", "attempt": "0.1"}, step])
    one.align_attempts()
    [placed] = one.of("step")
    assert (placed["host"], placed["attempt"], placed["host_reported"]) == ("n0", "0.1", "box")
    two = History([{**spawn, "node": "n0", "attempt": "0.1"}, {**spawn, "node": "n1", "attempt": "0.2", "t": 1.5},
                   step])
    two.align_attempts()
    [kept] = two.of("step")
    assert (kept["host"], kept["attempt"]) == ("box", "0.0") and "host_reported" not in kept
    # Seen on one node first (placed), on a second since: placed no more.
    late = History([{**spawn, "node": "n0", "attempt": "0.1"}, step])
    late.align_attempts()
    late.set_attempt("n1", 7, "0.2")
    [back] = late.of("step")
    assert (back["host"], back["attempt"]) == ("box", "0.0") and "host_reported" not in back
    # One process writes one hostname: a pid whose records name the harness's node and another machine is two
    # processes (a collision with one the harness never saw), and only those naming the node are placed on it.
    both = History([{**spawn, "node": "n0", "attempt": "0.1"}, {**step, "host": "n0"},
                    {**step, "host": "elsewhere", "t": 3.0, "step": 2}])
    both.align_attempts()
    assert [(r["host"], r["attempt"]) for r in both.of("step")] == [("n0", "0.1"), ("elsewhere", "0.0")]
    # The workers of one node name it alike: a second foreign name on that node is another machine's process.
    mixed = History([{**spawn, "node": "n0", "attempt": "0.1"}, {**spawn, "node": "n0", "worker_pid": 8, "rank": 1,
                                                                 "attempt": "0.1"},
                     step, {**step, "pid": 8, "rank": 1, "host": "other"}])
    mixed.align_attempts()
    assert {(r["host"], r["attempt"]) for r in mixed.of("step")} == {("box", "0.0"), ("other", "0.0")}
    # A name the harness gives another node is that node's, not an alias of this one.
    other_node = History([{**spawn, "node": "n0", "attempt": "0.1"},
                          {**spawn, "node": "n1", "worker_pid": 9, "rank": 1, "attempt": "0.1"},
                          {**step, "host": "n1"}])
    other_node.align_attempts()
    [kept] = other_node.of("step")
    assert (kept["host"], kept["attempt"]) == ("n1", "0.0")


@pytest.mark.parametrize("hosts", HOST_NAMES)
def test_an_unseen_worker_whose_pid_collides_lends_no_round(hosts: str) -> None:
    """Issue 56 item 1, after an adversarial review: placing a record by its pid alone must not let another node's
    process borrow a round. A restart that never started (``restart_never_started``) whose round-0 rank-1 worker
    went unseen with the pid of round 1's rank-0 worker on the other node (records written before that worker
    lived) stays a restart that never started; and a correct run with that collision keeps every verdict."""
    params = Params(fault_at=12)
    rename = HOST_NAMES[hosts]
    lie = OPERATORS["restart_never_started"].apply(play(params))
    assert lie is not None
    borrowed = unseen_worker_with_a_seen_pid(lie, unseen=(1, "0.0"), seen=(0, "0.1"))
    assert borrowed is not None
    borrowed = hosts_renamed(borrowed, rename) if rename else borrowed
    for kind in ("completes", "recovery_time", "matches_golden"):
        result = verdict_of(kind, judged(params)[kind], borrowed)
        assert result.verdict != "pass", f"{kind} PASSED a restart that never started: {result.reason}"
    truth = play(params)
    collided = unseen_worker_with_a_seen_pid(truth, unseen=(1, "0.1"), seen=(0, "0.0"))
    assert collided is not None
    collided = hosts_renamed(collided, rename) if rename else collided
    for kind, config in judged(params).items():
        want, got = verdict_of(kind, config, truth), verdict_of(kind, config, collided)
        assert got.verdict == want.verdict, f"{kind} {got.verdict.upper()} ({got.reason}), truth {want.verdict}"


def test_every_operator_applies_to_a_sample_and_breaks_a_judged_check() -> None:
    judged_kinds = set(CONFIGS) | {PROTOCOL}
    for op in OPERATORS.values():
        assert op.breaks and op.breaks <= judged_kinds, (op.name, op.breaks - judged_kinds)
        assert any(op.apply(play(p)) is not None for p in SAMPLES), f"{op.name} applies to no sample job"
        assert op.doc and op.item, f"{op.name}: say what it breaks and where it comes from"


def test_the_mutation_matrix_has_no_lie_passed(capsys: pytest.CaptureFixture[str]) -> None:
    cells = matrix()
    table = render(cells)
    with capsys.disabled():
        print("\n" + table)
    assert len(OPERATORS) >= 30
    assert not [cell for cell, verdict in cells.items() if verdict != "refused"], table


def test_an_operator_that_breaks_nothing_would_be_caught() -> None:
    """The property test must be able to fail: a no-op 'lie' is PASSed by the checks it claims to break."""
    truth = play(Params())
    assert all(verdict_of(kind, config, truth).verdict == "pass" for kind, config in judged(Params()).items())
    assert not math.isnan(truth.golden["final_loss"])
