"""pointer_durable with the filesystem's own record of the pointer's moves (issue 36: the polling gap closed).

The lies (a change under a named target, a late look the record does not prove, a forged record) are in the
mutation matrix (mutations.py); here, what the record adds to a truth: a late look proven, require_fsync."""

from __future__ import annotations

from mutations import _pointer_moves, _with_order, verdict_of
from truth import Params, play


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
