"""``pointer_durable``: the checkpoint pointer never named a checkpoint that was not whole when it moved.

A resume trusts ``latest``. A manager that moves it before the data is written and synced is one
crash away from a resume onto a torn file, and a run without that crash shows nothing: by the end
the data has arrived. So the harness watches the pointer while the run goes
(chaos.evidence.pointer: stat'ed every few milliseconds; each move's target judged at once, its
commit record and sizes, and its checksums up to a budget) and this check judges those moments:

* FAIL: some move named a checkpoint that did not exist, was an empty directory, or whose files did
  not match its commit record (missing, short, a checksum off; a torn zip) at that moment; or a save
  wrote its files (``ckpt_durable``) at the very path the pointer named from the save's begin on (a
  checkpoint rewritten in place while named: the watch looks only when the pointer moves, and sees it whole);
* INCONCLUSIVE: the pointer was not watched (the watch failed), never moved, was judged more than
  ``max_lag_s`` after the previous look (a starved harness: the move could have been ahead and caught up
  in between), named something that
  cannot be judged at a moment (a directory with no commit record the harness reads, a legacy pickle,
  a file over the budget), named the checkpoint a save wrote (its ``ckpt_begin`` path is the named target, a
  path inside it or a directory that holds it; with no begin reported, its ``ckpt_commit`` at the path the pointer
  already named: written in place, or into a temporary renamed over it, the history alone cannot tell; a rank's
  ``ckpt_reject`` of the named target excuses the save only where the harness's own evidence, its corruption of
  that path or the witness's broken look at it, shows it was not whole), or the workload committed
  a checkpoint the pointer was never seen to name (two moves inside one poll interval);
* PASS: every committed checkpoint was named by a move the harness saw, onto a whole checkpoint.

Where the checkpoint directory is the slow-storage mount, the filesystem's own record of every change
(chaos.evidence.fs_ops, the ``pointer_order`` record) closes the polling gap: every move is known at the
operation that made it, and a checkpoint changed while the pointer named it FAILs whatever the look found; a
late look is proof after all when nothing changed under its target between the move and the look (it was
whole at the look, so it was whole at the move), and a save that began at the named path is judged by what the
record shows changed under it, not by its begin. ``require_fsync`` also FAILs a move onto files written since
their last fsync (named while only in the page cache: a crash of the node, not of a process, loses them).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import Field

from chaos.checks._saves import _attempt_starts
from chaos.checks.base import Check, CheckConfig, CheckResult, RunOutcome
from chaos.evidence.events import History
from chaos.evidence.harness_records import CkptPointer, CkptVerify, Launch, PointerOrder, PointerWatch


class PointerDurableConfig(CheckConfig):
    pointer: str = "latest"
    """The pointer's file name in the checkpoint directory: a text file naming a checkpoint there, or a symlink."""
    hash_budget_mb: float = Field(default=256.0, gt=0)
    """Checksums are read at each move up to this much data; a larger checkpoint is judged by sizes, which is no
    proof (INCONCLUSIVE): raise it for big checkpoints (the look then takes longer)."""
    max_lag_s: float = Field(default=0.5, gt=0)
    """A move judged more than this long after the previous look (a starved harness) is not proof: the pointer
    may have been ahead of its data for that long and caught up before the look (unless the filesystem's own
    record shows nothing changed in between)."""
    require_fsync: bool = False
    """FAIL a move onto files not fsynced since their last write (needs the slow-storage mount's record: without
    it, INCONCLUSIVE). Off by default: a killed process loses nothing the page cache holds; a node that loses
    power does."""


class PointerDurable(Check, kind="pointer_durable"):
    """The checkpoint pointer never named a checkpoint that was not whole at the moment it moved."""

    Config = PointerDurableConfig
    watches_pointer = True
    """The runner watches ``config.pointer`` in the run's checkpoint directory (chaos.evidence.pointer)."""

    def evaluate(self, outcome: RunOutcome) -> CheckResult:
        h = outcome.history
        name = self.config.pointer
        # This check's pointer only: an experiment may watch two (latest and last.ckpt), each with its own check.
        watch = [r for r in h.harness(PointerWatch) if Path(str(r.pointer)).name == name]
        if not watch:
            return self.inconclusive(f"the harness did not watch '{name}' (no pointer_watch record): run under the "
                                     f"chaos runner, which watches the pointer a pointer_durable check names")
        broken = [r for r in watch if r.state == "error"]
        if broken:
            return self.inconclusive(f"the watch of '{name}' stopped: {broken[0].error}; moves after it were "
                                     f"not judged")
        if not any(r.state == "end" for r in watch):
            return self.inconclusive(f"the watch of '{name}' never ended (the harness stopped before its last look): "
                                     f"moves at the end of the run were not judged")
        moves = [r for r in h.harness(CkptPointer) if r.pointer == name]
        if not moves:
            return self.inconclusive(f"'{name}' never moved while the harness watched it (no checkpoint committed, "
                                     f"or the workload keeps no '{name}' in its checkpoint directory: set "
                                     f"pointer_durable's 'pointer' to the file it keeps)")
        t0 = min((r.t for r in h.harness(Launch)), default=moves[0].t)
        ahead = [m for m in moves if m.whole is False]
        figures: dict[str, Any] = {"moves": len(moves), "ahead": len(ahead),
                                   "hashed": sum(1 for m in moves if m.hashed),
                                   "max_gap_s": max((r.max_gap_s or 0.0 for r in watch), default=None)}
        order, order_problem = self._order(h, name)
        cwd = _workload_cwd(outcome)
        rewritten = [] if order is not None and all(isinstance(o["target"], str) for o in order) else \
            _rewritten_while_named(outcome, moves, cwd)
        figures["rewritten_while_named"] = len(rewritten)
        if order is not None:
            figures.update(order_moves=len(order), changed_after_move=sum(o["changed"] for o in order),
                           unsynced_moves=sum(1 for o in order if o["unsynced"]))
        if ahead:
            first = ahead[0]
            problems = "; ".join(str(p) for p in (first.problems or [])[:2]) or "not whole"
            more = f" ({len(ahead)} of {len(moves)} moves were ahead of their data)" if len(ahead) > 1 else ""
            return self.failed(f"'{name}' moved to {first.target} {first.t - t0:.2f} s into the run while "
                               f"it was not whole: {problems}{more}; a crash at that moment resumes from it",
                               **figures)
        changed = [o for o in order or [] if o["changed"]]
        if changed:
            first = changed[0]
            what = "; ".join(f"{c.get('op')} {c.get('path')} {float(c.get('t', first['t'])) - first['t']:+.3f} s"
                             for c in first.get("changes") or [])
            return self.failed(f"'{name}' named {first['name']} from {first['t'] - t0:.2f} s into the run (the "
                               f"filesystem's {first['op']}), and {first['changed']} change(s) under it followed while "
                               f"it still did ({what}): a crash in between resumes from a checkpoint still being "
                               f"written", **figures)
        proven = [r for r in rewritten if r["durable_t"] is not None]
        if proven:
            first = proven[0]
            return self.failed(f"'{name}' named {first['path']} while it was being rewritten in place: the save of "
                               f"step {first['step']} {_where(first)} {first['t'] - t0:.2f} s into the run, while "
                               f"'{name}' named it (since its move {first['move_t'] - t0:.2f} s into the run), and "
                               f"wrote its files there (ckpt_durable {first['durable_t'] - first['t']:+.2f} s) before "
                               f"'{name}' named anything else: a crash in between resumes from a torn checkpoint",
                               **figures)
        if self.config.require_fsync:
            if order is None:
                return self.inconclusive(f"require_fsync needs the checkpoint filesystem's own record of its fsyncs "
                                         f"(the slow-storage mount's op log): {order_problem}", **figures)
            unsynced = [o for o in order if o["unsynced"]]
            if unsynced:
                first = unsynced[0]
                return self.failed(f"'{name}' named {first['name']} {first['t'] - t0:.2f} s into the run while "
                                   f"{first['unsynced']} of its files were written since their last fsync "
                                   f"({', '.join(first.get('unsynced_files') or [])}): only in the page cache",
                                   **figures)
        if rewritten:
            first = rewritten[0]
            more = f"; {len(rewritten)} saves wrote the checkpoint '{name}' named" if len(rewritten) > 1 else ""
            return self.inconclusive(f"'{name}' named {first['path']} when the save of step {first['step']} "
                                     f"{_where(first)} {first['t'] - t0:.2f} s into the run (named since its move "
                                     f"{first['move_t'] - t0:.2f} s into the run{more}): a save written in place "
                                     f"(torch.save to one fixed path) leaves '{name}' naming a torn checkpoint until "
                                     f"it ends, and the watch looks only when '{name}' moves; whether it wrote in "
                                     f"place or into a temporary renamed over the path, only the slow-storage mount's "
                                     f"record of every change can tell (or write each save to a new path, then move "
                                     f"'{name}')", **figures)
        late = [m for m in moves if m.lag_s is not None and m.lag_s > self.config.max_lag_s
                and not (order is not None and _unchanged_until_look(m, order))]
        if late:
            return self.inconclusive(f"{len(late)} of {len(moves)} moves of '{name}' were judged more than "
                                     f"{self.config.max_lag_s:g} s after the previous look ({late[0].target}: "
                                     f"{late[0].lag_s:.2f} s; the harness was starved): a pointer ahead of its data "
                                     f"for less than that would have been missed", **figures)
        unjudged = [m for m in moves if m.whole is None]
        if unjudged:
            why = "; ".join(str(p) for p in (unjudged[0].problems or [])[:1])
            return self.inconclusive(f"{len(unjudged)} of {len(moves)} moves of '{name}' named a checkpoint the "
                                     f"harness cannot judge at a moment ({unjudged[0].target}: {why})",
                                     **figures)
        unhashed = [m for m in moves if not m.hashed]
        if unhashed:
            return self.inconclusive(f"{len(unhashed)} of {len(moves)} moves of '{name}' were judged by presence and "
                                     f"sizes only ({unhashed[0].target}: a DCP .metadata, or over the "
                                     f"{self.config.hash_budget_mb:g}-MB budget for checksums): a file preallocated "
                                     f"and not yet written looks the same; raise hash_budget_mb", **figures)
        if order is not None:
            unlooked = [o for o in order if not any(_looked_at(m, o, order) for m in moves)]
            if unlooked:
                first = unlooked[0]
                return self.inconclusive(f"the filesystem recorded {len(unlooked)} move(s) of '{name}' the watch never "
                                         f"looked at (first: onto {first['name']} {first['t'] - t0:.2f} s into the "
                                         f"run, by its {first['op']}; two moves inside one poll): their targets were "
                                         f"not judged whole", **figures)
        unseen = self._unseen(outcome, moves, cwd)
        if unseen:
            return self.inconclusive(f"the workload committed {', '.join(unseen[:4])} but '{name}' was never seen "
                                     f"naming it after that save began (two moves inside one poll of the watch, or a "
                                     f"pointer that skips commits): those moves were not judged", unseen=unseen,
                                     **figures)
        lag = max((m.lag_s or 0.0 for m in moves), default=0.0)
        unplaced = [o for o in order or [] if o["target"] is None]
        if order is not None and not unplaced:
            synced = "every file fsynced" if not figures["unsynced_moves"] else \
                f"{figures['unsynced_moves']} move(s) onto files not yet fsynced (require_fsync judges that)"
            return self.passed(f"'{name}' moved {len(moves)} time(s), each onto a checkpoint whole, checksums read, "
                               f"when the harness looked, and the filesystem's own record of its {len(order)} move(s) "
                               f"shows nothing under the target changed from the instant it moved ({synced})",
                               **figures)
        if unplaced:
            order_problem = (f"the filesystem's record could not place {len(unplaced)} of {len(order or [])} move(s) "
                             f"in the mount ({unplaced[0]['name']}): those rest on the look alone")
        lag_note = f"; {order_problem}" if order_problem else ""
        return self.passed(f"'{name}' moved {len(moves)} time(s), each onto a checkpoint whole, checksums read, when "
                           f"the harness looked (at most {lag:.3f} s after the move; a pointer ahead of its data for "
                           f"less than that is not seen{lag_note})", **figures)

    @staticmethod
    def _order(h: History, name: str) -> tuple[list[dict[str, Any]] | None, str]:
        """The filesystem's record of the pointer's moves (``pointer_order``), or None and why there is none. Each
        move is a dict as chaos.evidence.pointer.order_of writes it, held to its shape here before it is read."""
        records = [r for r in h.harness(PointerOrder) if r.pointer == name]
        if not records:
            return None, "the checkpoint directory was not the slow-storage mount, which records every change"
        if records[-1].error:
            return None, f"the filesystem's record is unusable: {records[-1].error}"
        order = records[-1].moves
        fields = {"t": (int, float), "b": int, "e": int, "name": str, "op": str, "changed": int, "unsynced": int}
        if not isinstance(order, list) or not all(
                isinstance(o, dict) and all(isinstance(o.get(k), ty) and not isinstance(o.get(k), bool)
                                            for k, ty in fields.items())
                and (o.get("target") is None or isinstance(o.get("target"), str))
                and (o.get("until") is None or isinstance(o.get("until"), int)) for o in order):
            return None, "the filesystem's record of the pointer's moves is malformed"
        return order, ""

    @staticmethod
    def _unseen(outcome: RunOutcome, moves: list[CkptPointer], cwd: str | None) -> list[str]:
        """Committed checkpoints the pointer should have been seen naming, after their save began, and was not. A
        pointer that is itself a checkpoint (it names itself) answers for its own commits; one that names entries
        answers for every commit of an entry beside it."""
        h = outcome.history
        pointer = str(moves[0].pointer)
        self_named = all(str(m.target) == pointer for m in moves)
        folder = str(Path(str(moves[0].path)).parent)
        out: set[str] = set()
        for commit in h.of("ckpt_commit"):
            raw = commit.path
            if not raw:
                continue
            entry = os.path.basename(os.path.normpath(str(raw)))
            if self_named and entry != pointer:
                continue
            beside = _spellings(os.path.join(folder, entry))
            # A relative path is the workload's, resolved where it ran, not where the harness runs: taken as the
            # harness's, the commit lands in another directory and drops out unjudged (issue 56 item 5).
            if not _may_name(str(raw), beside, cwd, folder):
                continue  # a checkpoint in another directory: no pointer here names it
            begins = [b.t for b in h.of("ckpt_begin") if b.t <= commit.t and b.path
                      and (b.path == raw or _may_name(str(b.path), beside, cwd, folder))]
            since = max(begins) if begins else float("-inf")
            if not any(Path(str(m.target)).name == entry and m.t >= since for m in moves):
                out.add(entry)
        return sorted(out)


def _looked_at(move: CkptPointer, o: dict[str, Any], order: list[dict[str, Any]]) -> bool:
    """The watch's ``move`` looked at what the filesystem's move ``o`` named, while it still named it."""
    if o["name"] != move.target or o["t"] > move.t:
        return False
    look_start = move.t - float(move.look_s or 0.0)
    until_t = next((x["t"] for x in order if x["e"] == o.get("until")), None)
    return o.get("until") is None or (until_t is not None and until_t >= look_start)


def _unchanged_until_look(move: CkptPointer, order: list[dict[str, Any]]) -> bool:
    """The look at ``move`` found its target whole; the filesystem's record shows the move that named it, placed in
    the mount, and nothing under the target changed from that instant to the look: it was whole when it moved."""
    named = [o for o in order if o["name"] == move.target and o["t"] <= move.t]
    if not named or move.whole is not True:
        return False
    last = max(named, key=lambda o: o["e"])
    return last["changed"] == 0 and isinstance(last.get("target"), str) and _looked_at(move, last, order)


def _where(save: dict[str, Any]) -> str:
    """How a save met the named checkpoint, for a verdict's reason: began (or, with no begin, committed) at it, at a
    path inside it, or at a directory that holds it."""
    at, named = os.path.normpath(save["at"]), os.path.normpath(save["path"])
    if at == named:
        return f"{save['how']} there" + (" (no ckpt_begin reported)" if save["how"] == "committed" else "")
    return f"{save['how']} at {save['at']} ({'inside it' if _under(at, named) else 'which holds it'}"  + \
        (", no ckpt_begin reported)" if save["how"] == "committed" else ")")


def _workload_cwd(outcome: RunOutcome) -> str | None:
    """The workload's working directory where the experiment names it (workload.cwd, ``{run_dir}`` substituted, as
    the launch resolves it); None: the harness does not know where it ran (the harness's own directory then, or a
    container's, or a node's)."""
    cwd = getattr(getattr(outcome.experiment, "workload", None), "cwd", None)
    if not isinstance(cwd, str) or not cwd:
        return None
    from chaos.runtime.launch import with_run_dir

    return os.path.abspath(os.path.expanduser(with_run_dir(cwd, outcome.run_dir)))


def _spellings(path: str) -> set[str]:
    """A path the harness wrote (a move's target), as compared: resolved (links, ``..``) as the pointer's target and a
    commit's path always were, and as spelled (a link resolved now may have led elsewhere during the run)."""
    return {os.path.realpath(path), os.path.normpath(os.path.abspath(path))}


def _under(inner: str, outer: str) -> bool:
    """``inner`` lies strictly inside ``outer`` (both normalized absolute paths)."""
    return inner != outer and inner.startswith(outer.rstrip(os.sep) + os.sep)


def _related(a: str, b: str, inside: bool, around: bool) -> bool:
    """``a`` is ``b``, or (``inside``) lies inside it, or (``around``) holds it."""
    return a == b or (inside and _under(a, b)) or (around and _under(b, a))


def _may_name(raw: str, where: set[str], cwd: str | None, folder: str, *, inside: bool = False,
              around: bool = False) -> bool:
    """Whether ``raw``, a path the workload wrote, may name ``where`` (one path's ``_spellings``), or with ``inside``
    a path inside it, or with ``around`` a directory that holds it. An absolute path is resolved as the harness's
    own; a relative one where the workload resolved it: against its working directory when the experiment names it,
    and against the checkpoint directory ``folder`` (CHAOS_CKPT_DIR: a script that reports 'step_000040' most likely
    means the entry there); where the working directory is not known, it may name any path it ends with (and, with
    ``inside``/``around``, any path its first components end, or any directory it ends). Never against the harness's
    own directory: that is where the harness runs, not where the workload did."""
    def near(spelled: set[str]) -> bool:
        return any(_related(s, w, inside, around) for s in spelled for w in where)

    if os.path.isabs(raw):
        return near(_spellings(raw))
    if any(near(_spellings(os.path.join(base, raw))) for base in (cwd, folder) if base):
        return True
    if cwd is not None:
        return False
    tail = os.path.normpath(raw).split(os.sep)
    while tail and tail[0] == os.pardir:
        tail = tail[1:]  # up from an unknown directory: still an unknown directory
    if not tail or tail == [os.curdir]:
        return True
    n = len(tail)
    for w in where:
        parts = [c for c in w.split(os.sep) if c]
        if parts[-n:] == tail:
            return True
        if around and any(parts[end - n:end] == tail for end in range(n, len(parts))):
            return True  # a directory above the target, spelled from an unknown directory
        if inside and any(tail[:k] == parts[-k:] for k in range(1, min(n, len(parts) + 1))):
            return True  # a path under the target, spelled from the directory that holds it
    return False


def _names_exactly(raw: str, where: set[str], cwd: str | None, *, inside: bool = False) -> bool:
    """``raw`` certainly names ``where`` (with ``inside``, or a path inside it): absolute, or relative to the
    workload's known working directory."""
    if not os.path.isabs(raw):
        if cwd is None:
            return False
        raw = os.path.join(cwd, raw)
    return any(_related(s, w, inside, False) for s in _spellings(raw) for w in where)


def _not_whole(outcome: RunOutcome, where: set[str], since: float, until: float, cwd: str | None) -> bool:
    """The harness's own evidence that the checkpoint at ``where`` was not whole some time in [since, until]: its
    corrupt-checkpoint fault struck it (chaos.faults.corrupt_checkpoint: ``details.path`` the entry, ``file`` the
    file it damaged), or the witness's ``ckpt_verify`` of it found it broken. A rank's ``ckpt_reject`` is only its
    word."""
    for fault in outcome.faults:
        if fault.kind != "corrupt-checkpoint" or not fault.injected or fault.t_inject is None \
                or fault.details.get("mode") == "break-latest" or not since <= fault.t_inject <= until:
            continue
        struck = [str(fault.details[k]) for k in ("path", "file") if fault.details.get(k)]
        if any(_related(s, w, True, True) for raw in struck if os.path.isabs(raw) for s in _spellings(raw)
               for w in where):
            return True
    return any(r.ok is False and since <= r.t <= until and r.path and _names_exactly(r.path, where, cwd, inside=True)
               for r in outcome.history.harness(CkptVerify))


def _rewritten_while_named(outcome: RunOutcome, moves: list[CkptPointer], cwd: str | None) -> list[dict[str, Any]]:
    """Saves that wrote the checkpoint the pointer named at that moment (issue 56 item 2): a manager that saves to one
    fixed path (``torch.save(state, dir / "model.pt")``) and rewrites the pointer with the same name after each save
    leaves it naming the file all through the next overwrite, and the watch, which looks when the pointer moves, sees
    it only whole. A save writes the named checkpoint where its ``ckpt_begin`` path is the named target, lies inside
    it (a file in a named directory) or holds it (the checkpoint directory of a named file); a save the workload
    reports no begin of (same attempt and step) is its ``ckpt_commit`` at such a path, where the pointer named that
    path before the save (from the previous commit of its attempt, or the attempt's start, on), not only by the move
    the save itself made. Each with ``durable_t`` where the save says it wrote its files at that path or inside it
    (``ckpt_durable``) while the pointer still named it: then it was rewritten in place, not replaced by a rename,
    and that is proof.

    Left out: a pointer that is itself the checkpoint (it names itself: every rewrite changes it, and each is a move
    the watch looks at), and a save over a named target the workload rejected after the pointer named it when the
    harness's own evidence shows it was not whole (its corruption struck it, or the witness found it broken): a
    crash during the save resumes from what the pointer already named, a checkpoint refused as not whole."""
    h = outcome.history
    pointer = str(moves[0].pointer)
    folder = str(Path(str(moves[0].path)).parent)
    ordered = sorted(moves, key=lambda m: m.t)
    begins, commits = h.of("ckpt_begin"), h.of("ckpt_commit")
    rejects, durables = h.of("ckpt_reject"), h.of("ckpt_durable")
    starts = _attempt_starts(h)

    def named_at(t: float) -> CkptPointer | None:
        return next((m for m in reversed(ordered) if m.t <= t), None)

    def writes(raw: Any, move: CkptPointer | None) -> bool:
        return bool(move is not None and raw and move.path and str(move.target) != pointer
                    and _may_name(str(raw), _spellings(move.path), cwd, folder, inside=True, around=True))

    saves: list[tuple[Any, float, Any, str]] = []  # (the save's record, when it began at the latest, the move, how)
    for begin in begins:
        move = named_at(begin.t)
        if writes(begin.path, move):
            saves.append((begin, begin.t, move, "began"))
    begun = {(b.attempt, b.step) for b in begins}
    for commit in commits:
        if (commit.attempt, commit.step) in begun:
            continue  # judged by its begin
        before = [c.t for c in commits if c.attempt == commit.attempt and c.step != commit.step and c.t < commit.t]
        since = max(before) if before else starts.get(str(commit.attempt), float("-inf"))
        since = min(since, commit.t)
        during = [m for m in (named_at(since),) if m is not None] + [m for m in ordered if since < m.t <= commit.t]
        if during and during[-1].t > since and writes(commit.path, during[-1]):
            during = during[:-1]  # the save's own move onto what it wrote
        move = next((m for m in reversed(during) if writes(commit.path, m)), None)
        if move is not None:
            saves.append((commit, max(since, move.t), move, "committed"))

    out: list[dict[str, Any]] = []
    done: set[tuple[Any, ...]] = set()
    for save, began, move, how in sorted(saves, key=lambda s: s[0].t):
        where = _spellings(str(move.path))
        if any(move.t <= r.t <= save.t and r.path and _names_exactly(str(r.path), where, cwd)
               for r in rejects) and _not_whole(outcome, where, move.t, save.t, cwd):
            continue
        key = (save.attempt, save.step, move.t)
        if key in done:
            continue  # each rank's begin of the same save
        done.add(key)
        durable = [d.t for d in durables if d.t >= began and d.step == save.step
                   and d.attempt == save.attempt and d.path
                   and _names_exactly(str(d.path), where, cwd, inside=True)
                   and all(m.path and _spellings(m.path) & where
                           for m in ordered if began < m.t <= d.t)]  # named all the while it wrote
        out.append({"path": str(move.path), "step": save.step, "t": save.t, "move_t": move.t,
                    "at": str(save.path), "how": how, "durable_t": min(durable) if durable else None})
    return out
