"""Records are parsed once where they are read: typed, read-only, a protocol break named at once."""

from __future__ import annotations

import copy
import json
import pickle

import pytest

from chaos.evidence.events import History
from chaos.evidence.records import Attempt, CkptLoad, ProtocolError, Record, Step, parse, record

STEP = {"ev": "step", "t": 1.0, "attempt": "0.1", "rank": 0, "pid": 7, "host": "h", "step": 12, "epoch": 0,
        "samples": [3, 4]}


def test_a_protocol_event_becomes_its_typed_record() -> None:
    r = parse(STEP)
    assert isinstance(r, Step) and (r.step, r.epoch, r.samples, r.rank) == (12, 0, [3, 4], 0)
    assert isinstance(r.attempt, Attempt) and r.attempt == "0.1" and r["attempt"] == "0.1"
    assert r == STEP and r.get("loss") is None and "samples" in r and "loss" not in r
    assert isinstance(parse({**STEP, "ev": "ckpt_load"}), CkptLoad)
    assert type(record({"ev": "harness_error", "t": 0.0})) is Record  # a harness kind without a class: a plain record
    assert json.loads(json.dumps(r.to_dict())) == STEP


@pytest.mark.parametrize("bad, named", [
    ({"step": None}, "'step' must be int, got None"),
    ({"step": "12"}, "'step' must be int, got '12'"),
    ({"attempt": 1}, "'attempt' must be str"),
    ({"samples": [1, "2"]}, "'samples' must be a list of dataset indices"),
])
def test_a_record_that_breaks_the_protocol_is_a_named_error(bad: dict, named: str) -> None:
    with pytest.raises(ProtocolError, match=named.replace("(", r"\(")):
        parse({**STEP, **bad})


def test_a_record_cannot_be_changed_once_read() -> None:
    # No check can alter what another check or a trigger reads.
    r = parse(STEP)
    with pytest.raises(TypeError):
        r["step"] = 99  # type: ignore[index]
    with pytest.raises(AttributeError):
        r.step = 99  # type: ignore[misc]
    with pytest.raises(AttributeError):
        r._data = {}  # type: ignore[misc]
    assert not hasattr(r, "__dict__")
    assert copy.deepcopy(r) == r and pickle.loads(pickle.dumps(r)) == r and type(copy.copy(r)) is Step


def test_attempts_order_by_number_and_still_key_by_their_string() -> None:
    assert Attempt("0.2") < Attempt("0.10") < Attempt("1.0") and Attempt("0.10") > "0.9"
    assert sorted(map(Attempt, ["1.0", "0.10", "0.2"])) == ["0.2", "0.10", "1.0"]
    assert {"0.1": "x"}[Attempt("0.1")] == "x" and (Attempt("1.2").launch, Attempt("1.2").restart) == (1, 2)
    assert Attempt("bogus") > Attempt("9.9") and Attempt("bogus").launch is None


def test_a_relabel_makes_a_new_record_that_keeps_what_was_reported() -> None:
    h = History()
    h.set_attempt("h", 7, "0.2")
    original = parse(STEP)
    [held] = h.add([original])
    assert held["attempt"] == "0.2" and held["attempt_reported"] == "0.1" and isinstance(held, Step)
    assert original["attempt"] == "0.1" and "attempt_reported" not in original  # what was read stays as read
    assert h.records == [held]


# Issue 32 item 16: what enters the history. A rank's own file cannot vouch for itself.
@pytest.mark.parametrize("line, named", [
    ({"event": "step"}, "the line says 'event'"),
    ({"ev": 3}, "'ev' must be str"),
    ({"ev": "ckpt_verify", "ok": True, "path": "/c"}, "ckpt_verify event: a kind only the harness writes"),
    ({"ev": "worker_exit", "rc": 0}, "worker_exit event: a kind only the harness writes"),
    ({"source": "harness"}, "'source' 'harness' is reserved"),
    ({"source": "output"}, "'source' 'output' is reserved"),
    ({"attempt_reported": "0.0"}, "'attempt_reported' is a field only the harness sets"),
])
def test_a_workload_line_that_claims_the_harness_voice_is_a_protocol_break(line: dict, named: str) -> None:
    data = {**STEP, **line}
    if "event" in line:
        del data["ev"]
    with pytest.raises(ProtocolError, match=named.replace("(", r"\(")):
        parse(data)


def test_every_line_of_a_rank_file_counts_and_a_harness_line_is_read_as_the_harness(tmp_path) -> None:
    events = tmp_path / "events"
    events.mkdir()
    renamed = {("event" if k == "ev" else k): v for k, v in STEP.items()} | {"step": 13}
    lines = [STEP, renamed, {**STEP, "ev": "ckpt_verify", "ok": True},
             {**STEP, "step": 14, "source": "harness"}, [1, 2]]
    (events / "h-7.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (tmp_path / "harness.jsonl").write_text(json.dumps({"ev": "ckpt_verify", "t": 2.0, "source": "harness",
                                                       "ok": True, "path": "/c"}) + "\n")
    h = History.from_run_dir(tmp_path)
    assert [r["step"] for r in h.of("step")] == [12]  # the forged lines are not steps
    assert len(h.malformed) == 4, h.malformed
    assert any("the line says 'event'" in m for m in h.malformed)
    assert any("not a JSON object" in m for m in h.malformed)
    assert [r["source"] for r in h.of("ckpt_verify")] == ["harness"]  # only harness.jsonl's


def test_the_harness_kinds_are_what_the_harness_logs_and_no_sdk_kind() -> None:
    """HARNESS_KINDS must name every kind chaos/ logs (a new one missing would let a workload forge it),
    and none the SDK emits (a workload would then be refused its own protocol)."""
    import re
    from pathlib import Path

    import chaos
    from chaos.evidence.records import HARNESS_KINDS, PROTOCOL

    root = Path(chaos.__file__).parent
    source = "\n".join(p.read_text() for p in root.rglob("*.py"))
    logged = set(re.findall(r"\blog\(\s*\"([a-z_]+)\"", source)) - {"step"}  # steps read from output: source=output
    assert logged <= HARNESS_KINDS, logged - HARNESS_KINDS
    emitted = set(re.findall(r"\bemit\(\s*\"([a-z_]+)\"", source)) | set(PROTOCOL)
    assert not emitted & HARNESS_KINDS
    # Where the kinds are listed and typed is no proof that anything logs them.
    for listed in ("records.py", "harness_records.py"):
        source = source.replace((root / "evidence" / listed).read_text(), "")
    unused = {k for k in HARNESS_KINDS if f'"{k}"' not in source}
    assert not unused, f"listed as harness kinds but never logged: {unused}"


def test_every_kind_the_checks_read_is_typed_and_an_absent_field_reads_none() -> None:
    """A check reads attributes: each protocol kind has its class, an optional field it leaves out reads None (as
    ``get`` does), and a field the protocol requires is never made up (a KeyError where a record lacks it)."""
    from chaos.evidence import records as rec

    kinds = {"start": rec.Start, "step": rec.Step, "ckpt_staged": rec.CkptStaged, "ckpt_begin": rec.CkptBegin,
             "ckpt_durable": rec.CkptDurable, "ckpt_commit": rec.CkptCommit, "ckpt_load": rec.CkptLoad,
             "ckpt_reject": rec.CkptReject, "ckpt_error": rec.CkptError, "final": rec.Final, "health": rec.Health,
             "instep": rec.Instep, "heal": rec.Heal, "discard": rec.Discard, "monitor": rec.Monitor,
             "inprocess_restart": rec.InprocessRestart}
    for ev, cls in kinds.items():
        r = record({"ev": ev, "t": 1.0, "pid": 7, "host": "h", "world_size": 2})
        assert type(r) is cls and (r.pid, r.host, r.world_size) == (7, "h", 2), ev
    assert set(rec.PROTOCOL) - {"hello"} <= set(kinds)
    heal = record({"ev": "heal", "step": 4, "replica_group": 1, "participants": 2})
    assert (heal.step, heal.replica_group, heal.participants) == (4, 1, 2)
    act = record({"ev": "instep", "fault": 0, "kind": "nan", "step": 3})
    assert (act.fault, act.kind, act.step, act.taints_from, act.where) == (0, "nan", 3, None, None)
    restart = record({"ev": "inprocess_restart", "source": "nvrx", "iteration": 1, "cause": "x"})
    assert (restart.source, restart.iteration, restart.cause) == ("nvrx", 1, "x")
    assert record({"ev": "ckpt_begin", "step": 2, "reason": "preempt"}).reason == "preempt"
    assert record({"ev": "ckpt_commit", "step": 2}).path is None and record({"ev": "ckpt_error"}).error is None
    step = parse({**STEP, "participating": False, "digest": "d"})
    assert (step.participating, step.digest, step.loss, step.participants) == (False, "d", None, None)
    with pytest.raises(KeyError):
        record({"ev": "final", "t": 1.0}).step  # noqa: B018
