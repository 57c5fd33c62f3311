"""``pointer_durable``: the checkpoint pointer never named a checkpoint that was not whole when it moved.

A resume trusts ``latest``. A manager that moves it before the data is written and synced is one
crash away from a resume onto a torn file, and a run without that crash shows nothing: by the end
the data has arrived. So the harness watches the pointer while the run goes
(chaos.evidence.pointer: stat'ed every few milliseconds; each move's target judged at once, its
commit record and sizes, and its checksums up to a budget) and this check judges those moments:

* FAIL: some move named a checkpoint that did not exist, was an empty directory, or whose files did
  not match its commit record (missing, short, a checksum off; a torn zip) at that moment;
* INCONCLUSIVE: the pointer was not watched (the watch failed), never moved, was judged more than
  ``max_lag_s`` after the previous look (a starved harness: the move could have been ahead and caught up
  in between), named something that
  cannot be judged at a moment (a directory with no commit record the harness reads, a legacy pickle,
  a file over the budget), or the workload committed
  a checkpoint the pointer was never seen to name (two moves inside one poll interval);
* PASS: every committed checkpoint was named by a move the harness saw, onto a whole checkpoint.

Where the checkpoint directory is the slow-storage mount, the filesystem's own record of every change
(chaos.evidence.fs_ops, the ``pointer_order`` record) closes the polling gap: every move is known at the
operation that made it, and a checkpoint changed while the pointer named it FAILs whatever the look found; a
late look is proof after all when nothing changed under its target between the move and the look (it was
whole at the look, so it was whole at the move). ``require_fsync`` also FAILs a move onto files written since
their last fsync (named while only in the page cache: a crash of the node, not of a process, loses them).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import Field

from chaos.checks.base import Check, CheckConfig, CheckResult, RunOutcome


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
        watch = [r for r in h.of("pointer_watch") if r.get("source") == "harness"
                 and Path(str(r.get("pointer"))).name == name]
        if not watch:
            return self.inconclusive(f"the harness did not watch '{name}' (no pointer_watch record): run under the "
                                     f"chaos runner, which watches the pointer a pointer_durable check names")
        broken = [r for r in watch if r.get("state") == "error"]
        if broken:
            return self.inconclusive(f"the watch of '{name}' stopped: {broken[0].get('error')}; moves after it were "
                                     f"not judged")
        if not any(r.get("state") == "end" for r in watch):
            return self.inconclusive(f"the watch of '{name}' never ended (the harness stopped before its last look): "
                                     f"moves at the end of the run were not judged")
        moves = [r for r in h.of("ckpt_pointer") if r.get("source") == "harness" and r.get("pointer") == name]
        if not moves:
            return self.inconclusive(f"'{name}' never moved while the harness watched it (no checkpoint committed, "
                                     f"or the workload keeps no '{name}' in its checkpoint directory: set "
                                     f"pointer_durable's 'pointer' to the file it keeps)")
        t0 = min((r.t for r in h.of("launch") if r.get("source") == "harness"), default=moves[0].t)
        ahead = [m for m in moves if m.get("whole") is False]
        figures: dict[str, Any] = {"moves": len(moves), "ahead": len(ahead),
                                   "hashed": sum(1 for m in moves if m.get("hashed")),
                                   "max_gap_s": max((r.get("max_gap_s") or 0.0 for r in watch), default=None)}
        order, order_problem = self._order(h, name)
        if order is not None:
            figures.update(order_moves=len(order), changed_after_move=sum(o["changed"] for o in order),
                           unsynced_moves=sum(1 for o in order if o["unsynced"]))
        if ahead:
            first = ahead[0]
            problems = "; ".join(str(p) for p in (first.get("problems") or [])[:2]) or "not whole"
            more = f" ({len(ahead)} of {len(moves)} moves were ahead of their data)" if len(ahead) > 1 else ""
            return self.failed(f"'{name}' moved to {first.get('target')} {first.t - t0:.2f} s into the run while "
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
        late = [m for m in moves if isinstance(m.get("lag_s"), (int, float)) and m["lag_s"] > self.config.max_lag_s
                and not (order is not None and _unchanged_until_look(m, order))]
        if late:
            return self.inconclusive(f"{len(late)} of {len(moves)} moves of '{name}' were judged more than "
                                     f"{self.config.max_lag_s:g} s after the previous look ({late[0].get('target')}: "
                                     f"{late[0]['lag_s']:.2f} s; the harness was starved): a pointer ahead of its data "
                                     f"for less than that would have been missed", **figures)
        unjudged = [m for m in moves if m.get("whole") is None]
        if unjudged:
            why = "; ".join(str(p) for p in (unjudged[0].get("problems") or [])[:1])
            return self.inconclusive(f"{len(unjudged)} of {len(moves)} moves of '{name}' named a checkpoint the "
                                     f"harness cannot judge at a moment ({unjudged[0].get('target')}: {why})",
                                     **figures)
        unhashed = [m for m in moves if not m.get("hashed")]
        if unhashed:
            return self.inconclusive(f"{len(unhashed)} of {len(moves)} moves of '{name}' were judged by presence and "
                                     f"sizes only ({unhashed[0].get('target')}: a DCP .metadata, or over the "
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
        unseen = self._unseen(outcome, moves)
        if unseen:
            return self.inconclusive(f"the workload committed {', '.join(unseen[:4])} but '{name}' was never seen "
                                     f"naming it after that save began (two moves inside one poll of the watch, or a "
                                     f"pointer that skips commits): those moves were not judged", unseen=unseen,
                                     **figures)
        lag = max((m.get("lag_s") or 0.0 for m in moves), default=0.0)
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
    def _order(h: Any, name: str) -> tuple[list[dict[str, Any]] | None, str]:
        """The filesystem's record of the pointer's moves (``pointer_order``), or None and why there is none."""
        records = [r for r in h.of("pointer_order") if r.get("source") == "harness" and r.get("pointer") == name]
        if not records:
            return None, "the checkpoint directory was not the slow-storage mount, which records every change"
        if records[-1].get("error"):
            return None, f"the filesystem's record is unusable: {records[-1]['error']}"
        order = records[-1].get("moves")
        fields = {"t": (int, float), "b": int, "e": int, "name": str, "op": str, "changed": int, "unsynced": int}
        if not isinstance(order, list) or not all(
                isinstance(o, dict) and all(isinstance(o.get(k), ty) and not isinstance(o.get(k), bool)
                                            for k, ty in fields.items())
                and (o.get("target") is None or isinstance(o.get("target"), str))
                and (o.get("until") is None or isinstance(o.get("until"), int)) for o in order):
            return None, "the filesystem's record of the pointer's moves is malformed"
        return order, ""

    @staticmethod
    def _unseen(outcome: RunOutcome, moves: list[Any]) -> list[str]:
        """Committed checkpoints the pointer should have been seen naming, after their save began, and was not. A
        pointer that is itself a checkpoint (it names itself) answers for its own commits; one that names entries
        answers for every commit of an entry beside it."""
        h = outcome.history
        pointer = str(moves[0].get("pointer"))
        self_named = all(str(m.get("target")) == pointer for m in moves)
        root = os.path.realpath(Path(str(moves[0].get("path"))).parent)
        out: set[str] = set()
        for commit in h.of("ckpt_commit"):
            raw = commit.get("path")
            path = Path(str(raw or ""))
            if not raw or os.path.realpath(path.parent) != root:
                continue  # a checkpoint in another directory: no pointer here names it
            if self_named and path.name != pointer:
                continue
            begins = [b.t for b in h.of("ckpt_begin") if b.get("path") == raw and b.t <= commit.t]
            since = max(begins) if begins else float("-inf")
            if not any(Path(str(m.get("target"))).name == path.name and m.t >= since for m in moves):
                out.add(path.name)
        return sorted(out)


def _looked_at(move: Any, o: dict[str, Any], order: list[dict[str, Any]]) -> bool:
    """The watch's ``move`` looked at what the filesystem's move ``o`` named, while it still named it."""
    if o["name"] != move.get("target") or o["t"] > move.t:
        return False
    look_start = move.t - float(move.get("look_s") or 0.0)
    until_t = next((x["t"] for x in order if x["e"] == o.get("until")), None)
    return o.get("until") is None or (until_t is not None and until_t >= look_start)


def _unchanged_until_look(move: Any, order: list[dict[str, Any]]) -> bool:
    """The look at ``move`` found its target whole; the filesystem's record shows the move that named it, placed in
    the mount, and nothing under the target changed from that instant to the look: it was whole when it moved."""
    named = [o for o in order if o["name"] == move.get("target") and o["t"] <= move.t]
    if not named or move.get("whole") is not True:
        return False
    last = max(named, key=lambda o: o["e"])
    return last["changed"] == 0 and isinstance(last.get("target"), str) and _looked_at(move, last, order)
