"""Mutation operators: each breaks exactly one property a check promises, in a history with known truth.

An operator takes a ``Truth`` (``truth.play``) and returns the lie: the same run with one thing made
wrong, or None where it does not apply to that scenario. ``breaks`` names the checks whose promise
the lie breaks: none of them may PASS it. A new operator joins the property tests by being
decorated here; a new check joins by being in ``truth.CONFIGS``.

Run as a script to print the mutation matrix (checks x operators): ``python tests/unit/checks/mutations.py``.
"""

from __future__ import annotations

import copy
import math
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).parent))

from truth import POISONED, Params, Truth, checks_for, play  # noqa: E402

from chaos.evidence.outcome import CheckResult, FaultRecord, judge_protocol  # noqa: E402
from chaos.registry import CHECKS  # noqa: E402
from chaos.run.judge import judge_checks  # noqa: E402
from chaos.spec.experiment import CheckSpec  # noqa: E402

PROTOCOL = "event_protocol"
"""The run-level verdict on lines left out of the history; it judges every mutation like a check."""


@dataclass(frozen=True)
class Operator:
    name: str
    breaks: frozenset[str]
    """The checks whose promise this lie breaks: none of them may PASS it."""
    item: str
    """Where the lie comes from: an item of the 'No PASS without proof' audits, or a property the check always had."""
    apply: Callable[[Truth], Truth | None]
    doc: str


OPERATORS: dict[str, Operator] = {}


def operator(*breaks: str, item: str = "") -> Callable[[Callable[[Truth], Truth | None]], Callable[[Truth], Truth | None]]:
    def register(fn: Callable[[Truth], Truth | None]) -> Callable[[Truth], Truth | None]:
        OPERATORS[fn.__name__] = Operator(fn.__name__, frozenset(breaks), item, fn, (fn.__doc__ or "").strip())
        return fn
    return register


def _copy(t: Truth) -> Truth:
    return replace(t, records=copy.deepcopy(t.records), faults=copy.deepcopy(t.faults),
                   golden=copy.deepcopy(t.golden), diagnostics=list(t.diagnostics))


def _of(t: Truth, ev: str, attempt: str | None = None, rank: int | None = None) -> list[dict[str, Any]]:
    return [r for r in t.records if r.get("ev") == ev and r.get("source") != "harness"
            and (attempt is None or r.get("attempt") == attempt) and (rank is None or r.get("rank") == rank)]


def _drop(t: Truth, doomed: list[dict[str, Any]]) -> None:
    ids = {id(r) for r in doomed}
    t.records = [r for r in t.records if id(r) not in ids]


def _looks(t: Truth, seen: str, attempt: str | None = None) -> list[dict[str, Any]]:
    return [r for r in t.records if r.get("ev") == "ckpt_verify" and r.get("seen") == seen
            and (attempt is None or r.get("attempt") == attempt)]


def _replay(t: Truth, **lie: Any) -> Truth:
    return play(t.params, **lie)


def _replay_resume(t: Truth, **lie: Any) -> Truth | None:
    """A lie about what the restart trained: none when it trained nothing (it resumed from the last step)."""
    if t.resumed_from >= t.params.steps:
        return None
    return play(t.params, **lie)


def _commits(t: Truth) -> list[int]:
    return sorted({r["step"] for r in _of(t, "ckpt_commit", "0.0")})


# ---- exactly_once -------------------------------------------------------------------------------

@operator("exactly_once", item="32.2")
def unsharded_rank_silent(t: Truth) -> Truth | None:
    """No DistributedSampler: every rank trains the whole global batch, and only rank 0 reports its steps."""
    m = _copy(t)
    for r in _of(m, "step", rank=0):
        step_peers = [q for q in _of(m, "step", r["attempt"]) if q["step"] == r["step"]]
        r["samples"] = sorted({i for q in step_peers for i in q["samples"]})
    _drop(m, [r for r in _of(m, "step") if r["rank"] != 0])
    return m


@operator("exactly_once", item="32.2")
def rank_silent(t: Truth) -> Truth | None:
    """The last rank trains but never reports a step."""
    m = _copy(t)
    _drop(m, [r for r in _of(m, "step") if r["rank"] == t.params.world - 1])
    return m


@operator("exactly_once", item="existing")
def skip_batch_on_resume(t: Truth) -> Truth | None:
    """The restart's data cursor skips one global batch."""
    return _replay_resume(t, cursor_shift=1)


@operator("exactly_once", item="32.5")
def skip_batch_golden_failed(t: Truth) -> Truth | None:
    """A skipped batch on resume, and the fault-free run failed, so no golden order can judge it."""
    m = _replay_resume(t, cursor_shift=1)
    if m is None:
        return None
    m.golden_error = "the golden run failed: exit 1 at step 3"
    return m


@operator("exactly_once", item="32.5")
def skip_batch_golden_unordered(t: Truth) -> Truth | None:
    """A skipped batch on resume, and the fault-free run carried no samples."""
    m = _replay_resume(t, cursor_shift=1)
    if m is None:
        return None
    m.golden.pop("epoch_samples", None)
    return m


@operator("exactly_once", item="32.5")
def skip_batch_golden_shorter(t: Truth) -> Truth | None:
    """A skipped batch on resume, and the fault-free run stopped before the run's last epoch."""
    m = _replay_resume(t, cursor_shift=1)
    if m is None:
        return None
    epochs = m.golden["epoch_samples"]
    m.golden["epoch_samples"] = {e: epochs[e] for e in sorted(epochs, key=int)[:1]}
    return m


@operator("exactly_once", item="existing")
def repeat_batch_on_resume(t: Truth) -> Truth | None:
    """The restart's data cursor goes back one global batch past the checkpoint."""
    if t.resumed_from < 1:
        return None
    return _replay_resume(t, cursor_shift=-1)


@operator("exactly_once", "matches_golden", item="existing")
def step_counter_jump(t: Truth) -> Truth | None:
    """The restart numbers its steps one higher than it trained."""
    return _replay_resume(t, step_shift=1)


@operator("exactly_once", item="existing")
def drop_kept_step(t: Truth) -> Truth | None:
    """Every rank's record of one kept step is lost."""
    m = _copy(t)
    step = t.resumed_from + 1
    if step > t.params.steps:
        return None
    _drop(m, [r for r in _resumed_steps(m) if r["step"] == step])
    return m


@operator("exactly_once", item="34")
def kept_step_skipped(t: Truth) -> Truth | None:
    """The workload dropped one kept step's update (a guard's skip policy, a loss scaler's overflow) and said so: its
    samples were consumed and never trained on."""
    m = _copy(t)
    step = t.resumed_from + 1
    if step > t.params.steps:
        return None
    for r in _resumed_steps(m):
        if r["step"] == step:
            r["skipped"] = True
    return m


def _in_process(t: Truth) -> bool:
    return t.params.scenario == "nan" and t.params.rollback == "in_process"


def _reload(m: Truth) -> dict[str, Any]:
    """The first rank's ckpt_load of an in-process rollback (attempt 0.0's second load)."""
    return [r for r in _of(m, "ckpt_load", "0.0")][m.params.world]


def _resumed_steps(m: Truth) -> list[dict[str, Any]]:
    """The step records of what ran after the resume: the restart's, or those after an in-process reload."""
    if not _in_process(m):
        return _of(m, "step", "0.1")
    return [r for r in _of(m, "step", "0.0") if r["t"] > _reload(m)["t"]]


@operator("exactly_once", item="existing")
def out_of_range_index(t: Truth) -> Truth | None:
    """A step consumes an index outside the dataset."""
    m = _copy(t)
    _of(m, "step", "0.0", 0)[0]["samples"][0] = t.params.dataset + 3
    return m


@operator("exactly_once", item="existing")
def duplicate_index(t: Truth) -> Truth | None:
    """One kept sample is replaced by another the same epoch already consumed."""
    m = _copy(t)
    first, second = _of(m, "step", "0.0", 0)[:2]
    if first["epoch"] != second["epoch"] or t.resumed_from < 2:
        return None
    second["samples"][0] = first["samples"][0]
    return m


@operator("exactly_once", item="32.15")
def zero_traced_samples(t: Truth) -> Truth | None:
    """Steps only seen from outside (step_regex on the output): nothing says what was consumed."""
    m = _copy(t)
    for r in _of(m, "step"):
        if r["rank"] == 0:
            r.update(source="harness", via="output")
    _drop(m, [r for r in _of(m, "step")])
    for r in m.records:
        if r.pop("via", None) == "output":
            r["source"] = "output"
            r.pop("samples", None)
            r.pop("pid", None)
    return m


class _SeenInOutput(Truth):
    """A truth with steps the harness read from the output (``source: output``): they reach the history as the runner
    adds them, beside the run directory's records (``Truth.history`` would write them into a rank's file, where a
    line claiming a reserved source is malformed and left out, so the lie would be no step at all)."""

    def history(self) -> Any:
        seen = [r for r in self.records if r.get("source") == "output"]
        history = Truth.history(replace(self, records=[r for r in self.records if r.get("source") != "output"]))
        history.add(seen)
        return history


def _seen_in_output(t: Truth, steps: list[dict[str, Any]]) -> _SeenInOutput:
    """``t`` with ``steps`` (step events) replaced by what workload.step_regex reads from the output: one line per step
    (rank 0 prints it), logged by the harness with the step number and the attempt, no rank and no samples."""
    doomed = {id(r) for r in steps}
    lines = [{"ev": "step", "t": r["t"], "mono": r.get("mono", r["t"]), "pid": 1, "host": r.get("host", "h"),
              "source": "output", "step": r["step"], "attempt": r["attempt"]} for r in steps if r.get("rank") == 0]
    m = _SeenInOutput(**{name: getattr(t, name) for name in t.__dataclass_fields__})
    m.records = sorted([r for r in t.records if id(r) not in doomed] + lines, key=lambda r: r["t"])
    return m


@operator("exactly_once", item="56.6")
def half_wired_script(t: Truth) -> Truth | None:
    """A script half-wired to the protocol: its ranks send start (with dataset_size) and nothing else; its steps are
    step_regex matches on the output. Nothing consumed was traced: no partial epoch not yet trained."""
    m = _copy(t)
    m = _seen_in_output(m, _of(m, "step"))
    _drop(m, [r for r in m.records if r.get("source") not in ("harness", "output") and r.get("ev") != "start"])
    return m


@operator("exactly_once", item="56.6")
def restart_steps_only_in_output(t: Truth) -> Truth | None:
    """The restart (or the reload) reports no step event and no final, only output lines (step_regex): what it consumed
    after its resume is unknown, and its untraced steps are no gap of an epoch not yet trained."""
    if t.resumed_from >= t.params.steps:
        return None
    m = _copy(t)
    m = _seen_in_output(m, _resumed_steps(m))
    _drop(m, _of(m, "final"))
    return m


@operator("exactly_once", item="56.6")
def no_step_records(t: Truth) -> Truth | None:
    """Every step record is lost (no step event, nothing matched on the output): nothing shows what was trained."""
    m = _copy(t)
    _drop(m, _of(m, "step"))
    return m


# ---- checkpoint_integrity -----------------------------------------------------------------------

@operator("checkpoint_integrity", item="32.1")
def pathless_load_of_corrupted(t: Truth) -> Truth | None:
    """The restart loads the corrupted checkpoint and reports the load with its step but no path."""
    if not t.corrupted_path:
        return None
    step = int(t.corrupted_path.rsplit("_", 1)[1])
    return _replay(t, resume_step=step, resume_path=None, reject=False)


@operator("checkpoint_integrity", item="existing")
def load_of_corrupted(t: Truth) -> Truth | None:
    """The restart loads the corrupted checkpoint, path and all, without rejecting it."""
    if not t.corrupted_path:
        return None
    step = int(t.corrupted_path.rsplit("_", 1)[1])
    m = _replay(t, resume_step=step, reject=False)
    _drop(m, _looks(m, "ckpt_load"))
    return m


@operator("checkpoint_integrity", item="existing")
def corruption_passed_over_silently(t: Truth) -> Truth | None:
    """The restart passes over the corrupted checkpoint without a ckpt_reject."""
    if not t.corrupted_path:
        return None
    return _replay(t, reject=False)


@operator("checkpoint_integrity", item="32.6")
def load_never_looked_at(t: Truth) -> Truth | None:
    """The checkpoint was torn after its commit; the witness's child died before it looked at the load."""
    m = _copy(t)
    looks = _looks(m, "ckpt_load", "0.1")
    if not looks:
        return None
    _drop(m, looks)
    m.records.append({"ev": "witness_incomplete", "t": looks[0]["t"], "mono": looks[0]["t"], "pid": 1, "host": "h",
                      "source": "harness", "sent": 5, "answered": 4})
    return m


@operator("checkpoint_integrity", item="32.11")
def restart_from_scratch(t: Truth) -> Truth | None:
    """The restart ignores its checkpoints and retrains from step 0."""
    return _replay(t, resume_step=0)


@operator("checkpoint_integrity", item="existing")
def resume_older_checkpoint(t: Truth) -> Truth | None:
    """The restart loads an older committed checkpoint than the newest good one."""
    older = [s for s in _commits(t) if s < t.resumed_from]
    if not older:
        return None
    return _replay(t, resume_step=older[-1], reject=False)


@operator("checkpoint_integrity", "exactly_once", item="existing")
def resume_uncommitted(t: Truth) -> Truth | None:
    """The restart loads a step nobody committed."""
    step = t.resumed_from + 1
    if step > t.params.steps or step in _commits(t):
        return None
    return _replay(t, resume_step=step)


@operator("checkpoint_integrity", item="existing")
def torn_commit(t: Truth) -> Truth | None:
    """The witness found a committed checkpoint invalid when it was committed."""
    m = _copy(t)
    look = _looks(m, "ckpt_commit")[0]
    look.update(ok=False, problems=["shard 0: 12 bytes, manifest says 100"])
    return m


@operator("checkpoint_integrity", item="existing")
def invalid_at_load(t: Truth) -> Truth | None:
    """The witness found the loaded checkpoint invalid when the load was seen."""
    m = _copy(t)
    looks = _looks(m, "ckpt_load", "0.1")
    if not looks:
        return None
    looks[0].update(ok=False, problems=["checksum mismatch in shard 1"])
    return m


@operator("checkpoint_integrity", PROTOCOL, item="32.16")
def forged_witness(t: Truth) -> Truth | None:
    """A torn commit, and a rank writes its own ckpt_verify (source: harness) saying it was fine."""
    m = _copy(t)
    look = _looks(m, "ckpt_commit")[0]
    look.update(ok=False, problems=["shard 0: 12 bytes, manifest says 100"])
    forged = dict(look, ok=True, problems=[], t=look["t"] + 0.01, pid=4000, forged=True, rank=0, attempt="0.0")
    m.records.append(forged)
    return m


# ---- the checkpoint pointer (issue 36) ----------------------------------------------------------

def _pointer_moves(t: Truth) -> list[dict[str, Any]]:
    return [r for r in t.records if r.get("ev") == "ckpt_pointer"]


@operator("pointer_durable", item="36")
def pointer_ahead_of_data(t: Truth) -> Truth | None:
    """The manager moved 'latest' before the step's data was written: the watch found nothing there."""
    m = _copy(t)
    move = _pointer_moves(m)[-1]
    move.update(whole=False, hashed=False, problems=["does not exist"])
    return m


@operator("pointer_durable", item="36")
def pointer_ahead_then_caught_up(t: Truth) -> Truth | None:
    """A move ahead of its data, and a second look a moment later (the data arrived) that found it whole."""
    m = _copy(t)
    move = _pointer_moves(m)[0]
    move.update(whole=False, problems=["state.pt: size 12 != manifest 100"])
    m.records.append(dict(move, whole=True, problems=[], t=move["t"] + 0.05))
    return m


@operator("pointer_durable", item="36")
def pointer_move_unseen(t: Truth) -> Truth | None:
    """A commit whose pointer move the watch never saw (two moves inside one poll): that move was not judged."""
    m = _copy(t)
    _drop(m, [_pointer_moves(m)[0]])
    return m


@operator("pointer_durable", item="36")
def pointer_never_watched(t: Truth) -> Truth | None:
    """The run was not watched at all: no pointer_watch record, no moves."""
    m = _copy(t)
    _drop(m, [r for r in m.records if r.get("ev") in ("pointer_watch", "ckpt_pointer")])
    return m


@operator("pointer_durable", item="36")
def pointer_judged_late(t: Truth) -> Truth | None:
    """The harness was starved: a move was judged 3 s after the previous look, when its data had long arrived."""
    m = _copy(t)
    _pointer_moves(m)[0]["lag_s"] = 3.0
    return m


@operator("pointer_durable", item="36")
def pointer_judged_by_sizes(t: Truth) -> Truth | None:
    """A move judged by presence and sizes only (over the budget): a preallocated, unwritten file looks the same."""
    m = _copy(t)
    _pointer_moves(m)[0].update(hashed=False)
    return m


@operator("pointer_durable", item="36")
def pointer_watch_never_ended(t: Truth) -> Truth | None:
    """The harness stopped before the watch's last look: no end record."""
    m = _copy(t)
    _drop(m, [r for r in m.records if r.get("ev") == "pointer_watch" and r.get("state") == "end"])
    return m


@operator("pointer_durable", item="36")
def another_pointers_moves(t: Truth) -> Truth | None:
    """The moves seen were another pointer's (last.ckpt), judged whole; 'latest' itself was never watched."""
    m = _copy(t)
    for r in m.records:
        if r.get("ev") == "ckpt_pointer":
            r["pointer"] = "last.ckpt"
        if r.get("ev") == "pointer_watch":
            r["pointer"] = "/ckpt/last.ckpt"
    return m


@operator("pointer_durable", item="36")
def pointer_seen_only_before_the_save(t: Truth) -> Truth | None:
    """The last commit's move was seen only before its save began (an earlier attempt's move to the same name)."""
    m = _copy(t)
    move = _pointer_moves(m)[-1]
    begin = next(r for r in m.records if r.get("ev") == "ckpt_begin" and r.get("path") == move.get("path"))
    move["t"] = begin["t"] - 1.0
    return m


@operator("pointer_durable", PROTOCOL, item="36")
def forged_pointer_look(t: Truth) -> Truth | None:
    """A move ahead of its data, and a rank writes its own ckpt_pointer (source: harness) saying the target was whole."""
    m = _copy(t)
    move = _pointer_moves(m)[-1]
    move.update(whole=False, problems=["does not exist"])
    m.records.append(dict(move, whole=True, problems=[], t=move["t"] + 0.01, pid=4000, forged=True, rank=0,
                          attempt="0.0"))
    return m


def _with_order(m: Truth) -> list[dict[str, Any]]:
    """The filesystem's own record of the truth's moves (the slow-storage mount's op log, as ``pointer_order``): each
    move made by a rename a moment before the watch saw it, nothing changed under its target while it was named."""
    moves = _pointer_moves(m)
    end = next(r for r in m.records if r.get("ev") == "pointer_watch" and r.get("state") == "end")
    order = [{"t": mv["t"] - 0.002, "b": 10 * i + 1, "e": 10 * i + 2,
              "until": 10 * i + 12 if i + 1 < len(moves) else None, "op": "rename", "name": mv["target"],
              "target": "/" + str(mv["target"]), "changed": 0, "changes": [], "unsynced": 0, "unsynced_files": []}
             for i, mv in enumerate(moves)]
    m.records.append({"ev": "pointer_order", "source": "harness", "t": end["t"] + 0.001, "pointer": "latest",
                      "oplog": "/run/slowfs-ops.jsonl", "ops": 10 * len(moves), "moves": order})
    return order


@operator("pointer_durable", item="36")
def pointer_changed_while_named(t: Truth) -> Truth | None:
    """Every look found its target whole, but the filesystem's record shows a write into the first target after the
    rename that named it (the look came after the write ended: the polling gap)."""
    m = _copy(t)
    order = _with_order(m)
    order[0].update(changed=1, changes=[{"op": "write", "path": order[0]["target"] + "/state.pt",
                                         "t": order[0]["t"] + 0.001}])
    return m


@operator("pointer_durable", item="36")
def pointer_judged_late_and_changed(t: Truth) -> Truth | None:
    """A move judged 3 s late, which the filesystem's record would prove, except that it shows a change under the
    target between the move and the look."""
    m = _copy(t)
    _pointer_moves(m)[0]["lag_s"] = 3.0
    order = _with_order(m)
    order[0].update(changed=1, changes=[{"op": "truncate", "path": order[0]["target"] + "/state.pt",
                                         "t": order[0]["t"] + 0.5}])
    return m


@operator("pointer_durable", item="36")
def pointer_judged_late_record_names_another(t: Truth) -> Truth | None:
    """A move judged 3 s late; the filesystem's record has no move naming what the look found: no proof."""
    m = _copy(t)
    _pointer_moves(m)[0]["lag_s"] = 3.0
    order = _with_order(m)
    order[0].update(name="step_999999", target="/step_999999")
    return m


@operator("pointer_durable", item="36")
def pointer_judged_late_record_unusable(t: Truth) -> Truth | None:
    """A move judged 3 s late, and the filesystem's record could not be read: no proof."""
    m = _copy(t)
    _pointer_moves(m)[0]["lag_s"] = 3.0
    _with_order(m)
    record = m.records[-1]
    record.pop("moves")
    record["error"] = "the filesystem's op log /run/slowfs-ops.jsonl is broken at line 3 of 9"
    return m


@operator("pointer_durable", PROTOCOL, item="36")
def forged_pointer_order(t: Truth) -> Truth | None:
    """A move judged 3 s late, and a rank writes its own pointer_order (source: harness) proving it."""
    m = _copy(t)
    _pointer_moves(m)[0]["lag_s"] = 3.0
    _with_order(m)
    m.records[-1].update(forged=True, pid=4000, rank=0, attempt="0.0")
    return m


def _one_path(m: Truth, path: str) -> list[dict[str, Any]]:
    """Every save of the truth made at one fixed ``path`` beside 'latest', which names it after each save; the saves'
    begins."""
    for r in m.records:
        if r.get("ev") in ("ckpt_begin", "ckpt_commit", "ckpt_load", "ckpt_verify", "ckpt_reject", "ckpt_pointer") \
                and str(r.get("path") or "").startswith("/ckpt/step_"):
            r["path"] = path
        if r.get("ev") == "ckpt_pointer":
            r.update(target=path.rsplit("/", 1)[-1], step=None)
    return [r for r in m.records if r.get("ev") == "ckpt_begin"]


@operator("pointer_durable", item="56.2")
def pointer_names_file_rewritten_in_place(t: Truth) -> Truth | None:
    """The manager saves every checkpoint to one fixed file (torch.save(state, dir / "model.pt"), no temporary file)
    and rewrites 'latest' with the same name after each save: 'latest' named model.pt all through the next
    overwrite. The watch looks only when 'latest' changes, after each save: every look found it whole."""
    m = _copy(t)
    return m if len(_one_path(m, "/ckpt/model.pt")) > 1 else None


def _begins_at(t: Truth, saved_at: str, reported: str) -> Truth | None:
    """Every save at ``saved_at`` (one fixed path, rewritten in place), its ckpt_begin reporting ``reported``."""
    m = _copy(t)
    begins = _one_path(m, saved_at)
    for r in begins:
        r["path"] = reported
    return m if len(begins) > 1 else None


@operator("pointer_durable", item="56.2")
def pointer_names_directory_rewritten_in_place(t: Truth) -> Truth | None:
    """The same with a directory checkpoint rewritten in place ('latest' names 'checkpoint', every save writes into
    it), the saves' paths spelled another way than the watch's (a trailing slash, a '..')."""
    return _begins_at(t, "/ckpt/checkpoint", "/ckpt/sub/../checkpoint/")


@operator("pointer_durable", item="56.2")
def pointer_names_file_rewritten_in_place_begin_at_its_directory(t: Truth) -> Truth | None:
    """pointer_names_file_rewritten_in_place, the workload reporting its checkpoint directory (/ckpt) as each save's
    path: the save writes model.pt, which 'latest' names, inside the path it began at."""
    return _begins_at(t, "/ckpt/model.pt", "/ckpt")


@operator("pointer_durable", item="56.2")
def pointer_names_directory_rewritten_in_place_begin_inside(t: Truth) -> Truth | None:
    """pointer_names_directory_rewritten_in_place, the workload reporting the file it writes inside the named
    directory (/ckpt/checkpoint/state.pt) as each save's path."""
    return _begins_at(t, "/ckpt/checkpoint", "/ckpt/checkpoint/state.pt")


@operator("pointer_durable", item="56.2")
def pointer_names_file_rewritten_in_place_no_begins(t: Truth) -> Truth | None:
    """pointer_names_file_rewritten_in_place by a workload that never reports ckpt_begin (nanoGPT: torch.save to
    one fixed path, then rewrite 'latest'): its commits at the path 'latest' already named are the saves."""
    m = _copy(t)
    begins = _one_path(m, "/ckpt/model.pt")
    _drop(m, begins)
    return m if len(begins) > 1 else None


@operator("pointer_durable", item="56.2")
def pointer_names_file_rewritten_in_place_rejected_by_a_rank(t: Truth) -> Truth | None:
    """pointer_names_file_rewritten_in_place, and a rank writes a ckpt_reject of the named file just before each
    save: a rank's word, with no harness evidence (no corruption struck it, the witness found it whole) that the
    named checkpoint was not whole."""
    m = _copy(t)
    begins = _one_path(m, "/ckpt/model.pt")
    for b in begins:
        t_reject = b["t"] - 0.01
        m.records.insert(m.records.index(b), {**{k: v for k, v in b.items() if k != "step"}, "ev": "ckpt_reject",
                                              "t": t_reject, "mono": b["mono"] - 0.01, "path": "/ckpt/model.pt",
                                              "reason": "stale"})
    return m if len(begins) > 1 else None


@operator("pointer_durable", item="56.5")
def pointer_move_unseen_relative_commit(t: Truth) -> Truth | None:
    """pointer_move_unseen, with the workload's paths relative (it runs in its checkpoint directory and reports
    'step_000004'): the commit whose move was never seen is the same commit, however the path is spelled."""
    m = _copy(t)
    _drop(m, [_pointer_moves(m)[0]])
    for r in _of(m, "ckpt_begin") + _of(m, "ckpt_commit"):
        r["path"] = r["path"].removeprefix("/ckpt/")
    return m


# ---- faults inside the step (issue 34) ----------------------------------------------------------

@operator("no_corrupt_commit", item="34")
def commit_nonfinite(t: Truth) -> Truth | None:
    """The witness's scan of one committed checkpoint found NaNs (a stack that saved a poisoned state)."""
    m = _copy(t)
    look = _looks(m, "ckpt_commit")[-1]
    look["values"] = {**look["values"], "nonfinite": 7, "bad": ["state.pt.model.w (7 of 100)"]}
    return m


@operator("no_corrupt_commit", item="34")
def commit_finite_corruption(t: Truth) -> Truth | None:
    """A committed checkpoint whose values are all finite but differ from what training computes (a flipped
    mantissa bit): only the fault-free run's checkpoint at the same step shows it."""
    if t.params.scenario == "resize":
        return None  # checkpoints after a world-size change are compared with nothing (golden_digests off)
    m = _copy(t)
    look = _looks(m, "ckpt_commit")[-1]
    look["values"] = {**look["values"], "digest": "flipped-" + look["values"]["digest"]}
    return m


@operator("no_corrupt_commit", item="34")
def commit_unscanned(t: Truth) -> Truth | None:
    """One committed checkpoint was looked at but its tensors were never scanned (no values in the look)."""
    m = _copy(t)
    _looks(m, "ckpt_commit")[0].pop("values")
    return m


@operator("no_corrupt_commit", item="34")
def commit_partly_scanned(t: Truth) -> Truth | None:
    """One committed checkpoint holds a file the scan could not load: its numbers are unknown, not finite."""
    m = _copy(t)
    look = _looks(m, "ckpt_commit")[0]
    look["values"] = {**look["values"], "unscanned": ["optim.pt (UnpicklingError: unsupported global)"]}
    return m


@operator("no_corrupt_commit", item="34")
def commit_never_witnessed(t: Truth) -> Truth | None:
    """The witness never looked at the last committed checkpoint (its ckpt_verify is missing)."""
    m = _copy(t)
    _drop(m, [_looks(m, "ckpt_commit")[-1]])
    return m


@operator("no_corrupt_commit", item="34")
def forged_clean_scan(t: Truth) -> Truth | None:
    """A poisoned commit, and a rank writes its own ckpt_verify (source: harness) saying the scan was clean."""
    m = _copy(t)
    look = _looks(m, "ckpt_commit")[-1]
    look["values"] = {**look["values"], "nonfinite": 3, "bad": ["w (3 of 100)"]}
    m.records.append(dict(look, values=dict(look["values"], nonfinite=0, bad=[]), t=look["t"] + 0.01, pid=4000,
                          forged=True, rank=0, attempt="0.0"))
    return m


@operator("rolled_back", "no_corrupt_commit", "matches_golden", "detection", item="34")
def nan_trained_on(t: Truth) -> Truth | None:
    """No guard: the NaN went into the update, the job trained on to the end and committed poisoned checkpoints."""
    if t.params.scenario != "nan":
        return None
    return _replay(t, guard_lag=None)


@operator("rolled_back", "no_corrupt_commit", "matches_golden", item="34")
def nan_resumed_from_poisoned(t: Truth) -> Truth | None:
    """The guard fired late: a checkpoint saved after the NaN was committed, and the restart resumed from it."""
    p = t.params
    if p.scenario != "nan" or p.fault_at + p.ckpt_every > p.steps:
        return None
    m = _replay(t, guard_lag=p.ckpt_every)
    return m if m.resumed_from > p.fault_at else None


@operator("no_corrupt_commit", "matches_golden", item="34")
def reload_kept_the_poison(t: Truth) -> Truth | None:
    """An in-process rollback that announced its reload (ckpt_load of the clean step) but kept the poisoned state:
    the lineage looks rolled back, and every checkpoint it commits from then on, and its final state, hold the NaN."""
    if not _in_process(t):
        return None
    m = _copy(t)
    reload_t, acted = _reload(m)["t"], _of(m, "instep")[0]["step"]
    for r in m.records:
        if (r.get("ev") == "ckpt_verify" and r.get("seen") == "ckpt_commit" and r["t"] > reload_t
                and r.get("step", 0) >= acted):
            r["values"] = dict(POISONED, digest="poisoned-" + str(r["values"].get("digest")))
    for r in _of(m, "final"):
        r["digest"] = "poisoned-" + r["digest"]
    return m


@operator("rolled_back", item="34")
def struck_rank_never_reloaded(t: Truth) -> Truth | None:
    """An in-process rollback where the rank the fault acted on logged no reload (its peer did): its process may have
    carried the poisoned state on through every step after it."""
    if not _in_process(t):
        return None
    m = _copy(t)
    struck = _of(m, "instep")[0]["rank"]
    _drop(m, [_of(m, "ckpt_load", "0.0", struck)[-1]])
    return m


@operator("detection", item="34")
def nan_caught_late(t: Truth) -> Truth | None:
    """The guard caught the NaN two steps after it acted (no commit in between, so the restart is still clean):
    two poisoned updates were applied first, beyond a bound of 0 steps."""
    p = t.params
    if p.scenario != "nan" or p.fault_at + 2 >= p.steps or (p.fault_at + 1) // p.ckpt_every != (p.fault_at + 2) // p.ckpt_every:
        return None
    return _replay(t, guard_lag=2)


@operator("detection", item="34")
def nan_caught_late_claimed_early(t: Truth) -> Truth | None:
    """The guard caught the NaN two steps late, and its health event names the step the fault acted in: the
    attempt had reported the poisoned steps complete by then, so the claim cannot make them untrained."""
    m = nan_caught_late(t)
    if m is None:
        return None
    acted = _of(m, "instep")[0]["step"]
    for r in _of(m, "health"):
        r["step"] = acted
    return m


@operator("detection", item="34")
def nan_credited_to_unrelated_alert(t: Truth) -> Truth | None:
    """No guard: the NaN was trained on to the end; a straggler alert about another rank came right after it
    acted (an unrelated health event is not the job naming the NaN)."""
    if t.params.scenario != "nan":
        return None
    m = _replay(t, guard_lag=None)
    act = _of(m, "instep")[0]
    m.records.append({"ev": "health", "t": act["t"] + 0.05, "mono": act["t"] + 0.05, "pid": 4000, "host": "h",
                      "rank": 0, "world_size": t.params.world, "attempt": "0.0", "source": "straggler",
                      "code": "slow_rank", "device": 0, "action": "alert", "slow_rank": 0, "ratio": 1.6,
                      "step": act["step"]})
    m.records.sort(key=lambda r: r["t"])
    return m


@operator("detection", item="34")
def peer_left_waiting(t: Truth) -> Truth | None:
    """The guard named the NaN at once, but rank 0 stayed in the collective for 60 s before it exited (and the
    restart waited for it): the fault held a peer far beyond the bound."""
    if t.params.scenario != "nan":
        return None
    m = _copy(t)
    exit0 = (next(r for r in _of(m, "ckpt_load", "0.0") if r.get("rank") == 0 and r["t"] >= _reload(m)["t"])
             if _in_process(m) else  # in-process: rank 0 stayed 60 s before it reloaded and trained on
             next(r for r in m.records if r.get("ev") == "worker_exit" and r.get("attempt") == "0.0" and r.get("rank") == 0))
    for r in m.records:
        if r["t"] >= exit0["t"] and r is not exit0:
            r["t"] += 60.0
            r["mono"] = r.get("mono", r["t"]) + 60.0
    exit0["t"] += 59.0
    exit0["mono"] = exit0.get("mono", exit0["t"]) + 59.0
    m.records.sort(key=lambda r: r["t"])
    for f in m.faults:
        if f.t_revert is not None and f.t_revert >= exit0["t"] - 59.0:
            f.t_revert += 60.0
    return m


@operator("no_corrupt_commit", item="34")
def latest_overwritten_unscanned(t: Truth) -> Truth | None:
    """Every save overwrites one path (latest.pt) and only the first commit was looked at: the later
    checkpoints at that path were never scanned, and one clean look must not vouch for them."""
    m = _copy(t)
    for r in m.records:
        if r.get("ev") in ("ckpt_begin", "ckpt_commit", "ckpt_load", "ckpt_verify", "ckpt_reject") and r.get("path"):
            r["path"] = "/ckpt/latest.pt"
    looks = _looks(m, "ckpt_commit")
    if len(looks) < 2:
        return None
    _drop(m, looks[1:])
    return m


@operator("rolled_back", item="34")
def flip_saved_in_checkpoint(t: Truth) -> Truth | None:
    """A fault written between two steps, right after a step whose checkpoint was then saved holding it,
    and the restart resumed from that very checkpoint (so every kept step of the struck attempt ran before
    the fault, yet the state they hand on is corrupted)."""
    p = t.params
    if p.scenario != "nan" or p.fault_at % p.ckpt_every or t.resumed_from != p.fault_at:
        return None
    m = _copy(t)
    for r in _of(m, "instep"):
        r.update(where="param", taints_from=p.fault_at)
    return m


@operator("rolled_back", "detection", item="34")
def nan_landing_unreported(t: Truth) -> Truth | None:
    """No rank reported where the fault acted (no instep event): the landing is unknown, and so are the steps to
    its detection (not proven 0)."""
    if t.params.scenario != "nan":
        return None
    m = _copy(t)
    _drop(m, _of(m, "instep"))
    return m


@operator("rolled_back", item="34")
def nan_landing_claimed_late(t: Truth) -> Truth | None:
    """A rank claims the fault acted in the last step, long after it was armed (so nothing would look tainted)."""
    if t.params.scenario != "nan":
        return None
    m = _copy(t)
    for r in _of(m, "instep"):
        r["step"] = t.params.steps + 1
    return m


# ---- the history itself -------------------------------------------------------------------------

@operator("exactly_once", "replicas_agree", PROTOCOL, item="32.16")
def rank_says_event(t: Truth) -> Truth | None:
    """The last rank's lines name their kind 'event' instead of 'ev': it vanishes unless counted as malformed."""
    m = _copy(t)
    for r in m.records:
        if r.get("source") != "harness" and r.get("rank") == t.params.world - 1 and "ev" in r:
            r["event"] = r.pop("ev")
    return m


@operator(PROTOCOL, item="32.16")
def self_vouching_steps(t: Truth) -> Truth | None:
    """A rank's step lines claim to be the harness's (source: harness)."""
    m = _copy(t)
    for r in _of(m, "step", rank=0):
        r.update(source="harness", forged=True)
    return m


# ---- finals and the golden run ------------------------------------------------------------------

@operator("matches_golden", item="32.4")
def nan_final_loss(t: Truth) -> Truth | None:
    """The run diverged: the last step's loss is NaN on every rank."""
    m = _copy(t)
    for r in _of(m, "step"):  # every attempt's: a restart after the last commit runs no step of its own
        if r["step"] == t.params.steps:
            r["loss"] = math.nan
    return m


@operator("matches_golden", item="32.4")
def null_final_loss(t: Truth) -> Truth | None:
    """The last step's loss was written as null (a NaN serialised by a strict encoder)."""
    m = _copy(t)
    for r in _of(m, "step"):  # every attempt's: a restart after the last commit runs no step of its own
        if r["step"] == t.params.steps:
            r["loss"] = None
    return m


@operator("matches_golden", item="32.4")
def golden_nan_loss(t: Truth) -> Truth | None:
    """The fault-free run diverged: its final loss is NaN (a comparison with it proves nothing)."""
    if t.params.scenario != "resize":
        return None
    m = _copy(t)
    m.golden["final_loss"] = math.nan
    return m


@operator("matches_golden", item="existing")
def loss_drift_resize(t: Truth) -> Truth | None:
    """After a world-size change, the final loss is 20 % off the fault-free run's."""
    if t.params.scenario != "resize":
        return None
    m = _copy(t)
    for r in _of(m, "step"):  # every attempt's: a restart after the last commit runs no step of its own
        if r["step"] == t.params.steps:
            r["loss"] *= 1.2
    return m


@operator("replicas_agree", item="existing")
def digest_differs_rank(t: Truth) -> Truth | None:
    """One rank ends with another state than its replicas."""
    m = _copy(t)
    _of(m, "final", rank=0)[0]["digest"] = "e" * 64
    return m


@operator("matches_golden", item="existing")
def digest_differs_golden(t: Truth) -> Truth | None:
    """Every rank agrees, on another state than the fault-free run's."""
    if t.params.scenario == "resize":
        return None
    m = _copy(t)
    for r in _of(m, "final"):
        r["digest"] = "f" * 64
    return m


@operator("replicas_agree", item="32.14")
def rank_without_final(t: Truth) -> Truth | None:
    """The last rank writes no final, and rank 0's final carries no world_size."""
    m = _copy(t)
    _drop(m, _of(m, "final", rank=t.params.world - 1))
    for r in _of(m, "final"):
        r.pop("world_size", None)
    return m


# ---- completion, recovery, detection, goodput ---------------------------------------------------

@operator("completes", "matches_golden", item="existing")
def final_short(t: Truth) -> Truth | None:
    """The final attempt stops two steps short of the target and says so."""
    m = _copy(t)
    last = t.params.steps - 2
    if last <= t.resumed_from:
        return None
    _drop(m, [r for r in _resumed_steps(m) if r["step"] > last])
    for r in _of(m, "final"):
        r["step"] = last
    return m


@operator("completes", item="existing")
def exit_nonzero(t: Truth) -> Truth | None:
    """The job exits 1."""
    m = _copy(t)
    m.exit_code = 1
    return m


@operator("completes", item="existing")
def timed_out(t: Truth) -> Truth | None:
    """The harness stopped the job at its time limit."""
    m = _copy(t)
    m.timed_out = True
    return m


@operator("recovery_time", "goodput", item="existing")
def stall_before_resume(t: Truth) -> Truth | None:
    """The restart waits 600 s before anything happens (a rendezvous that hangs, a slow requeue)."""
    m = _copy(t)
    spawns = [r for r in m.records if r.get("ev") == "worker_spawn" and r.get("attempt") == "0.1"]
    # An in-process rollback (no restart): the reload waits instead.
    reloads = [r for r in m.records if r.get("ev") == "ckpt_load" and r.get("attempt") == "0.0" and r.get("step")]
    if not spawns and not reloads:
        return None
    t0 = (spawns or reloads)[0]["t"]
    for r in m.records:
        if r["t"] >= t0:
            r["t"] += 600.0
            r["mono"] = r.get("mono", r["t"]) + 600.0
            if "t_event" in r and r["t_event"] >= t0:
                r["t_event"] += 600.0
        if r.get("ev") == "exit":
            r["wall_s"] += 600.0
    return m


@operator("recovery_time", "completes", "matches_golden", item="32.13")
def restart_never_started(t: Truth) -> Truth | None:
    """The restart's workers were spawned (the harness saw them, and saw them exit) but no rank of it ever sent
    start, nor anything after; the job still exited 0. A spawn is no restart: none happened, bounded or not."""
    if _in_process(t):
        return None  # no restart to fake
    m = _copy(t)
    # The restart's own records, and the witness's looks at the loads and commits it never made.
    _drop(m, [r for r in m.records if r.get("attempt") == "0.1"
              and (r.get("source") != "harness" or r.get("ev") == "ckpt_verify")])
    return m


@operator("detection", item="existing")
def hang_outlasted(t: Truth) -> Truth | None:
    """The hang is released after 1 s; only then do the workers exit (the job never noticed it)."""
    if t.params.scenario != "hang":
        return None
    m = _copy(t)
    hang = next(f for f in m.faults if f.kind == "hang-rank")
    hang.t_release = hang.t_inject + 1.0
    return m


@operator("detection", item="32.8")
def hang_credited_with_later_kill(t: Truth) -> Truth | None:
    """Nobody noticed the hang; a scripted kill of rank 0 came later, and its victim's exit and the
    restart it caused are all that followed."""
    if t.params.scenario != "hang":
        return None
    m = _copy(t)
    hang = next(f for f in m.faults if f.kind == "hang-rank")
    exits = [r for r in m.records if r.get("ev") == "worker_exit" and r.get("attempt") == "0.0"]
    first = min(exits, key=lambda r: r["t"])
    rank0 = next(r for r in exits if r["rank"] == 0)
    m.faults.append(FaultRecord(len(m.faults), "kill-rank", f"kill-rank#{len(m.faults)}", first["t"] - 0.05,
                                details={"rank": 0, "pids": [rank0["worker_pid"]], "trigger": "at_time"},
                                t_revert=first["t"] - 0.05))
    return m


@operator("detection", item="32.9")
def unrelated_alert_credited(t: Truth) -> Truth | None:
    """Nobody noticed the hang (the harness released it; only then did the workers exit); a straggler alert
    about another rank, unrelated to it, came while it lasted."""
    if t.params.scenario != "hang":
        return None
    m = _copy(t)
    hang = next(f for f in m.faults if f.kind == "hang-rank")
    exits = [r for r in m.records if r.get("ev") == "worker_exit" and r.get("attempt") == "0.0"]
    hang.t_release = min(r["t"] for r in exits) - 0.1
    m.records.append({"ev": "health", "t": hang.t_inject + 0.5, "mono": hang.t_inject + 0.5, "pid": 4000, "host": "h",
                      "rank": 0, "world_size": t.params.world, "attempt": "0.0", "source": "straggler",
                      "code": "slow_rank", "device": 0, "action": "alert", "slow_rank": 0, "ratio": 1.6})
    m.records.sort(key=lambda r: r["t"])
    return m


# ---- truth-preserving rewrites (no lie: every verdict must stay what it was) --------------------

def script_keeps_its_label(t: Truth) -> Truth:
    """Not a lie: the user's script labels its own attempts and keeps the first one across the restart (a
    Slurm requeue, a peer agent that only re-rendezvoused): every rank record of the restart says attempt 0.0.
    The harness's own records still name the rounds it saw (worker_spawn with generation, worker_pid and node;
    the witness's looks at what the history held, relabelled), so the one attempt rule
    (``History.align_attempts``) must give the restart back its own attempt, and every check the same verdict."""
    m = _copy(t)
    for r in m.records:
        if r.get("source") != "harness" and r.get("attempt") == "0.1":
            r["attempt"] = "0.0"
    return m


def on_two_nodes(t: Truth) -> Truth:
    """Not a lie: the same job with its ranks on two nodes (``n0`` the even ranks, ``n1`` the odd), as the
    harness saw them spawn and as chaos.sdk writes them (each rank's ``host`` the harness's name for its node)."""
    m = _copy(t)
    for r in m.records:
        if not isinstance(r.get("rank"), int):
            continue
        node = f"n{r['rank'] % 2}"
        if r.get("source") == "harness" and r.get("ev") in ("worker_spawn", "worker_exit"):
            r["node"] = node
        elif r.get("source") != "harness":
            r["host"] = node
    return m


def hosts_renamed(t: Truth, name: Callable[[str], str]) -> Truth:
    """Not a lie: every rank writes ``name(its node)`` as its ``host``, as a user's script that writes the
    protocol by hand with ``socket.gethostname()`` does: a fully qualified name, or the one hostname every node of
    the local Slurm cluster shares. The harness's own records keep its names for the nodes."""
    m = _copy(t)
    for r in m.records:
        if r.get("source") != "harness" and isinstance(r.get("host"), str):
            r["host"] = name(r["host"])
    return m


def unseen_worker_with_a_seen_pid(t: Truth, unseen: tuple[int, str], seen: tuple[int, str]) -> Truth | None:
    """The job on two nodes, where the harness never saw the worker of (rank, attempt) ``unseen`` spawn (a listing
    that failed, a worker too short-lived to be seen) and that worker's pid is the one the harness saw for
    ``seen`` on the other node (pods number their processes alike): its records are another node's process, in
    another round, whatever host they name, and must not be placed as the seen worker's."""
    m = on_two_nodes(t)
    spawns = {(r["rank"], r["attempt"]): r["worker_pid"] for r in m.records if r.get("ev") == "worker_spawn"}
    if unseen not in spawns or seen not in spawns or unseen[0] % 2 == seen[0] % 2:
        return None
    victim = spawns[unseen]
    m.records = [r for r in m.records if not (r.get("ev") in ("worker_spawn", "worker_exit")
                                                and r.get("worker_pid") == victim)]
    for r in m.records:
        if r.get("pid") == victim and r.get("source") != "harness":
            r["pid"] = spawns[seen]
    return m


def verdict_of(kind: str, config: dict[str, Any], truth: Truth) -> CheckResult:
    """One check's verdict over a truth (or a lie), as the runner would judge it."""
    outcome = truth.outcome()
    if kind == PROTOCOL:
        if outcome.history.malformed:
            return judge_protocol(outcome.history.malformed)
        return CheckResult(PROTOCOL, "pass", "no line left out")
    cls = CHECKS.get(kind)
    try:
        spec = CheckSpec(kind=kind, config=cls.Config.model_validate(config))
    except Exception as exc:
        return CheckResult(kind, "error", f"{type(exc).__name__}: {exc}")
    # Through the runner's own judging: the golden obtained once, before judging, only when the check
    # says it needs it (Check.needs_golden); a crashing check is an error verdict.
    [result] = judge_checks([spec], outcome)
    return result


def judged(params: Params) -> dict[str, dict[str, Any]]:
    """Every check a truth of these params is judged by, the protocol verdict included."""
    return {**checks_for(params), PROTOCOL: {}}


SAMPLES = (Params(), Params(scenario="corrupt", fault_at=9), Params(scenario="hang", fault_at=9),
           Params(scenario="nan", fault_at=5), Params(scenario="nan", steps=13, ckpt_every=3, fault_at=7, world=3),
           Params(scenario="nan", fault_at=8), Params(scenario="nan", fault_at=6, rollback="in_process"),
           Params(scenario="nan", steps=13, ckpt_every=3, fault_at=7, world=3, rollback="in_process"),
           Params(scenario="resize"), Params(world=3, dataset=30, steps=10, ckpt_every=3, fault_at=7, seed=4),
           Params(steps=12, ckpt_every=4, fault_at=12), Params(epoch_base=1, fault_at=5))
"""Fixed truths the printed matrix is computed over (the property tests draw many more)."""


def matrix(samples: tuple[Params, ...] = SAMPLES) -> dict[tuple[str, str], str]:
    """(operator, check) -> refused / PASSED / n-a over the samples; 'PASSED' where the lie broke the check's promise."""
    cells: dict[tuple[str, str], str] = {}
    for op in OPERATORS.values():
        for params in samples:
            lie = op.apply(play(params))
            if lie is None:
                continue
            for kind, config in judged(params).items():
                if kind not in op.breaks:
                    continue
                verdict = verdict_of(kind, config, lie).verdict
                cell = {"pass": "PASSED", "error": "ERROR"}.get(verdict, "refused")
                if cells.get((op.name, kind), "refused") == "refused":
                    cells[(op.name, kind)] = cell
    return cells


def render(cells: dict[tuple[str, str], str]) -> str:
    kinds = sorted({*truth_checks(), PROTOCOL})
    width = max(len(n) for n in OPERATORS) + 2
    head = " " * width + " ".join(f"{k[:10]:>10}" for k in kinds)
    lines = [head]
    for name in OPERATORS:
        row = [cells.get((name, k), "n-a") for k in kinds]
        lines.append(f"{name:<{width}}" + " ".join(f"{c:>10}" for c in row))
    refused = sum(c == "refused" for c in cells.values())
    passed = sum(c == "PASSED" for c in cells.values())
    crashed = sum(c == "ERROR" for c in cells.values())
    lines.append(f"{len(OPERATORS)} operators x {len(kinds)} checks: {refused} cells refused, {passed} PASSED a lie, "
                 f"{crashed} crashed on one")
    return "\n".join(lines)


def truth_checks() -> list[str]:
    from truth import CONFIGS

    return list(CONFIGS)


if __name__ == "__main__":
    print(render(matrix()))
