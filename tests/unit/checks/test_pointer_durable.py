"""pointer_durable with the filesystem's own record of the pointer's moves (issue 36: the polling gap closed).

The lies (a change under a named target, a late look the record does not prove, a forged record) are in the
mutation matrix (mutations.py); here, what the record adds to a truth: a late look proven, require_fsync. And issue 56:
a target rewritten in place while the pointer names it, a commit's relative path."""

from __future__ import annotations

from typing import Any

from mutations import OPERATORS, _pointer_moves, _with_order, verdict_of
from truth import Params, play

from chaos.checks.pointer_durable import PointerDurable, PointerDurableConfig


def test_a_late_look_is_proof_when_nothing_changed_under_its_target_from_the_move_to_the_look() -> None:
    truth = play(Params())
    _pointer_moves(truth)[0]["lag_s"] = 3.0
    assert verdict_of("pointer_durable", {}, truth).verdict == "inconclusive"
    _with_order(truth)
    result = verdict_of("pointer_durable", {}, truth)
    assert result.verdict == "pass", result.reason
    assert "filesystem's own record" in result.reason and result.figures["changed_after_move"] == 0


def test_the_record_must_span_the_look() -> None:
    """The move that named the target was followed by another before the look began: the record's window (to the
    next move) does not reach the look, so it proves nothing about what the look found."""
    truth = play(Params())
    first = _pointer_moves(truth)[0]
    first["lag_s"] = 3.0
    order = _with_order(truth)
    first["look_s"] = 0.001
    order[1]["t"] = first["t"] - 0.5   # the next move ended well before the look began
    order[0]["t"] = first["t"] - 1.0
    assert verdict_of("pointer_durable", {}, truth).verdict == "inconclusive"


def test_require_fsync_fails_a_move_onto_data_still_in_the_page_cache_and_needs_the_record() -> None:
    truth = play(Params())
    assert verdict_of("pointer_durable", {"require_fsync": True}, truth).verdict == "inconclusive"
    order = _with_order(truth)
    assert verdict_of("pointer_durable", {"require_fsync": True}, truth).verdict == "pass"
    order[1].update(unsynced=1, unsynced_files=["/step_000010/state.pt"])
    result = verdict_of("pointer_durable", {"require_fsync": True}, truth)
    assert result.verdict == "fail" and "/step_000010/state.pt" in result.reason, result.reason
    passed = verdict_of("pointer_durable", {}, truth)
    assert passed.verdict == "pass" and "not yet fsynced" in passed.reason, passed.reason


def test_without_the_record_the_pass_says_what_it_rests_on() -> None:
    result = verdict_of("pointer_durable", {}, play(Params()))
    assert result.verdict == "pass" and "is not seen" in result.reason
    assert "not the slow-storage mount" in result.reason


def test_a_move_the_record_could_not_place_proves_no_late_look() -> None:
    truth = play(Params())
    _pointer_moves(truth)[0]["lag_s"] = 3.0
    order = _with_order(truth)
    order[0]["target"] = None
    result = verdict_of("pointer_durable", {}, truth)
    assert result.verdict == "inconclusive" and "judged more than" in result.reason, result.reason


def test_a_move_the_filesystem_recorded_and_the_watch_never_looked_at_is_not_proof() -> None:
    truth = play(Params())
    order = _with_order(truth)
    order.insert(1, dict(order[1], name="step_000015", target="/step_000015", t=order[1]["t"] - 0.001,
                         until=order[1]["e"], b=order[1]["b"] - 4, e=order[1]["b"] - 3))
    result = verdict_of("pointer_durable", {}, truth)
    assert result.verdict == "inconclusive" and "never looked at" in result.reason, result.reason


# ---- issue 56: a target rewritten in place while named; a commit's relative path --------------------------------

def _evaluate(outcome: Any) -> Any:
    return PointerDurable(PointerDurableConfig()).evaluate(outcome)


def test_a_pointer_naming_a_file_rewritten_in_place_is_not_proof() -> None:
    """Item 2: every save to one fixed file, 'latest' rewritten with the same name after each. Each look (at each
    rewrite of 'latest') found model.pt whole; a crash during the next overwrite resumes from a torn file. The usual
    manager (each save to a new step_N, then 'latest' moved onto it) has none."""
    assert verdict_of("pointer_durable", {}, play(Params())).figures["rewritten_while_named"] == 0
    lie = OPERATORS["pointer_names_file_rewritten_in_place"].apply(play(Params()))
    assert lie is not None
    result = verdict_of("pointer_durable", {}, lie)
    assert result.verdict == "inconclusive", result.reason
    assert "/ckpt/model.pt" in result.reason and "step 8" in result.reason and "in place" in result.reason, \
        result.reason
    assert result.figures["rewritten_while_named"] == 2


def test_a_save_written_at_the_path_the_pointer_names_fails() -> None:
    """The save says where its files were written (ckpt_durable: at the named path itself, which the protocol says
    nothing a resume selects names yet): proof the target was rewritten while the pointer named it."""
    lie = OPERATORS["pointer_names_file_rewritten_in_place"].apply(play(Params()))
    assert lie is not None
    begin = [r for r in lie.records if r.get("ev") == "ckpt_begin"][1]
    lie.records.insert(lie.records.index(begin) + 1,
                       dict(begin, ev="ckpt_durable", t=begin["t"] + 0.01, mono=begin["mono"] + 0.01))
    result = verdict_of("pointer_durable", {}, lie)
    assert result.verdict == "fail", result.reason
    assert "/ckpt/model.pt" in result.reason and "step 8" in result.reason, result.reason


def test_a_directory_rewritten_in_place_is_the_same_hazard_however_its_path_is_spelled() -> None:
    lie = OPERATORS["pointer_names_directory_rewritten_in_place"].apply(play(Params()))
    assert lie is not None
    result = verdict_of("pointer_durable", {}, lie)
    assert result.verdict == "inconclusive" and "/ckpt/checkpoint" in result.reason, result.reason


def test_a_save_over_the_named_checkpoint_the_restart_rejected_is_no_new_window() -> None:
    """The corruption scenario re-saves the step the pointer still names, which the restart rejected: a crash during
    that save resumes from what the pointer already named, a checkpoint refused as not whole. Without the rejection
    the re-save is a window like any other."""
    truth = play(Params(scenario="corrupt", fault_at=9))
    assert verdict_of("pointer_durable", {}, truth).verdict == "pass"
    silent = OPERATORS["corruption_passed_over_silently"].apply(truth)
    assert silent is not None
    result = verdict_of("pointer_durable", {}, silent)
    assert result.verdict == "inconclusive" and "/ckpt/step_000008" in result.reason, result.reason


def test_the_filesystem_record_judges_a_save_onto_the_named_target() -> None:
    """On the slow-storage mount the op log has every change under the named target: a write into it FAILs (the
    record's own finding); a record that shows none is the proof the begin alone cannot give."""
    lie = OPERATORS["pointer_names_file_rewritten_in_place"].apply(play(Params()))
    assert lie is not None
    order = _with_order(lie)
    assert verdict_of("pointer_durable", {}, lie).verdict == "pass"
    order[0].update(changed=1, changes=[{"op": "truncate", "path": "/model.pt", "t": order[1]["t"] - 0.3}])
    assert verdict_of("pointer_durable", {}, lie).verdict == "fail"


def test_a_relative_commit_path_is_placed_where_the_workload_meant_it() -> None:
    """Item 5: a relative commit path is the workload's, not the harness's: the same commit the absolute path names
    (a move never seen: INCONCLUSIVE), however it is spelled; dropped only where the workload's known working
    directory places it in another directory."""
    lie = OPERATORS["pointer_move_unseen_relative_commit"].apply(play(Params()))
    assert lie is not None
    result = verdict_of("pointer_durable", {}, lie)
    assert result.verdict == "inconclusive" and "step_000004" in result.reason, result.reason
    for r in lie.records:
        if r.get("ev") in ("ckpt_begin", "ckpt_commit"):
            r["path"] = "ckpt/" + r["path"]  # relative to the checkpoint directory's parent
    assert verdict_of("pointer_durable", {}, lie).verdict == "inconclusive"  # the workload's cwd is not known
    outcome = lie.outcome()
    outcome.experiment.workload.cwd = "/"
    assert _evaluate(outcome).verdict == "inconclusive"  # /ckpt/step_000004: beside the pointer
    outcome.experiment.workload.cwd = "/elsewhere"
    assert _evaluate(outcome).verdict == "pass"  # /elsewhere/ckpt/step_000004: no pointer here names it


# ---- issue 56 item 2, round 2: a save that writes the named target by another path; a rank's own reject ---------

def _saves(truth: Any, ev: str) -> list[dict[str, Any]]:
    return [r for r in truth.records if r.get("ev") == ev]


def test_the_reference_managers_shapes_still_pass() -> None:
    """Every save to a new path, then the pointer moved onto it (workloads/trainkit: begin at step_N, durable at its
    temporary, 'latest' moved, commit; Lightning: begin/commit at epoch=..-step=N.ckpt, last.ckpt a link onto it;
    a workload that reports only commits; one that commits, then moves; paths relative to an unknown directory):
    no save wrote what the pointer named at that moment."""
    for params in (Params(), Params(scenario="corrupt", fault_at=9), Params(scenario="resize")):
        truth = play(params)
        for begin in _saves(truth, "ckpt_begin"):  # trainkit: the save's files written into a temporary first
            truth.records.insert(truth.records.index(begin) + 1, dict(
                begin, ev="ckpt_durable", path=begin["path"].replace("step_", ".tmp-step_"), t=begin["t"] + 0.001,
                mono=begin["mono"] + 0.001))
        result = verdict_of("pointer_durable", {}, truth)
        assert result.verdict == "pass" and result.figures["rewritten_while_named"] == 0, result.reason

        lightning = play(params)
        for r in lightning.records:
            if str(r.get("path") or "").startswith("/ckpt/step_"):
                r["path"] = r["path"].replace("/ckpt/step_", "/ckpt/epoch=0-step=") + ".ckpt"
            if r.get("ev") == "ckpt_pointer":
                r["pointer"], r["target"] = "last.ckpt", r["path"].rsplit("/", 1)[-1]
            if r.get("ev") == "pointer_watch":
                r["pointer"] = "/ckpt/last.ckpt"
        for fault in lightning.faults:  # the harness's corruption of the checkpoint the restart rejected
            if "path" in fault.details:
                fault.details["path"] = fault.details["path"].replace("/ckpt/step_", "/ckpt/epoch=0-step=") + ".ckpt"
        result = verdict_of("pointer_durable", {"pointer": "last.ckpt"}, lightning)
        assert result.verdict == "pass", result.reason

        commits_only = play(params)
        commits_only.records = [r for r in commits_only.records if r.get("ev") != "ckpt_begin"]
        assert verdict_of("pointer_durable", {}, commits_only).verdict == "pass"
        for commit in _saves(commits_only, "ckpt_commit"):  # the commit reported before the pointer moves
            move = next(r for r in commits_only.records if r.get("ev") == "ckpt_pointer" and r["path"] == commit["path"]
                        and r["t"] < commit["t"])
            move["t"], commit["t"] = commit["t"], move["t"]
        commits_only.records.sort(key=lambda r: r["t"])
        assert verdict_of("pointer_durable", {}, commits_only).verdict == "pass"

        relative = play(params)
        for r in _saves(relative, "ckpt_begin") + _saves(relative, "ckpt_commit"):
            r["path"] = "ckpt/" + r["path"].removeprefix("/ckpt/")
        assert verdict_of("pointer_durable", {}, relative).verdict == "pass"


def test_a_save_that_writes_the_named_target_by_another_path_is_not_proof() -> None:
    """(a) the save begins at the directory that holds the named file; (b) at a file inside the named directory;
    (c) no begin at all, its commit at the path the pointer already named. And a relative spelling of each."""
    for op, at in (("pointer_names_file_rewritten_in_place_begin_at_its_directory", "/ckpt (which holds it)"),
                   ("pointer_names_directory_rewritten_in_place_begin_inside", "/ckpt/checkpoint/state.pt (inside it)"),
                   ("pointer_names_file_rewritten_in_place_no_begins", "committed there (no ckpt_begin reported)")):
        lie = OPERATORS[op].apply(play(Params()))
        assert lie is not None
        result = verdict_of("pointer_durable", {}, lie)
        assert result.verdict == "inconclusive" and at in result.reason and "step 8" in result.reason, result.reason
        assert result.figures["rewritten_while_named"] == 2, (op, result.figures)
    inside = OPERATORS["pointer_names_directory_rewritten_in_place_begin_inside"].apply(play(Params()))
    assert inside is not None
    for r in _saves(inside, "ckpt_begin"):
        r["path"] = "checkpoint/state.pt"  # relative to an unknown directory: may be inside the named one
    assert verdict_of("pointer_durable", {}, inside).verdict == "inconclusive"
    holds = OPERATORS["pointer_names_file_rewritten_in_place_begin_at_its_directory"].apply(play(Params()))
    assert holds is not None
    for r in _saves(holds, "ckpt_begin"):
        r["path"] = "ckpt"
    assert verdict_of("pointer_durable", {}, holds).verdict == "inconclusive"


def test_a_save_that_committed_in_place_then_moved_the_pointer_is_not_proof() -> None:
    """(c) with the commit reported before the pointer is rewritten: the move before the commit is the previous
    save's, and it named the path the save wrote."""
    lie = OPERATORS["pointer_names_file_rewritten_in_place_no_begins"].apply(play(Params()))
    assert lie is not None
    for commit in _saves(lie, "ckpt_commit"):
        move = next(r for r in lie.records if r.get("ev") == "ckpt_pointer" and r["step"] is None
                    and commit["t"] - 1.0 < r["t"] < commit["t"])
        move["t"], commit["t"] = commit["t"], move["t"]
    lie.records.sort(key=lambda r: r["t"])
    result = verdict_of("pointer_durable", {}, lie)
    assert result.verdict == "inconclusive" and "/ckpt/model.pt" in result.reason, result.reason


def test_a_file_written_inside_the_named_directory_fails() -> None:
    """The save says it wrote its files inside the named directory (ckpt_durable) while the pointer named it."""
    lie = OPERATORS["pointer_names_directory_rewritten_in_place_begin_inside"].apply(play(Params()))
    assert lie is not None
    begin = _saves(lie, "ckpt_begin")[1]
    lie.records.insert(lie.records.index(begin) + 1,
                       dict(begin, ev="ckpt_durable", t=begin["t"] + 0.01, mono=begin["mono"] + 0.01))
    result = verdict_of("pointer_durable", {}, lie)
    assert result.verdict == "fail" and "/ckpt/checkpoint/state.pt (inside it)" in result.reason, result.reason


def test_a_ranks_reject_exempts_a_save_only_with_the_harness_evidence_that_the_target_was_not_whole() -> None:
    """(d) A rank's ckpt_reject of the named checkpoint is only its word: the save over it is a window like any
    other, unless the harness's corruption struck it or the witness found it broken after the pointer named it."""
    lie = OPERATORS["pointer_names_file_rewritten_in_place_rejected_by_a_rank"].apply(play(Params()))
    assert lie is not None
    assert verdict_of("pointer_durable", {}, lie).figures["rewritten_while_named"] == 2
    first, second = _saves(lie, "ckpt_begin")[1:3]
    lie.records.append({"ev": "ckpt_verify", "source": "harness", "t": second["t"] - 0.05, "path": "/ckpt/model.pt",
                        "seen": "ckpt_load", "attempt": second["attempt"], "ok": False, "problems": ["torn zip"]})
    assert verdict_of("pointer_durable", {}, lie).figures["rewritten_while_named"] == 1  # the second save only
    lie.records[-1]["ok"] = True
    assert verdict_of("pointer_durable", {}, lie).figures["rewritten_while_named"] == 2
    lie.faults[0].kind, lie.faults[0].details = "corrupt-checkpoint", {"path": "/ckpt/model.pt", "mode": "truncate",
                                                                       "file": "/ckpt/model.pt"}
    lie.faults[0].t_inject = first["t"] - 0.05
    assert verdict_of("pointer_durable", {}, lie).figures["rewritten_while_named"] == 1  # the first save only
    lie.faults[0].details["mode"] = "break-latest"  # the pointer broken, not the checkpoint it names
    assert verdict_of("pointer_durable", {}, lie).figures["rewritten_while_named"] == 2
