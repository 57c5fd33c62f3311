"""The run so far, folded from what arrives at each poll: the one object the run loop reads.

Triggers, stuck detection, game-day stop rules and the live view read it while the run goes; its
``history`` is what recovery figures and checks judge when it ends. Folding happens in one place,
so a fact (the highest step, which ranks joined an attempt) cannot mean one thing to a trigger
and another to a check, and the rules on it are tested from records alone, with no processes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from chaos.evidence.events import History
from chaos.evidence.fault_record import FaultRecord
from chaos.evidence.records import Record, attempt_key, record


@dataclass
class LiveState:
    """What a live view shows at each poll (``Runner(on_poll=...)``); read it, never change it."""

    now: float
    """Seconds since launch."""
    max_step: int
    attempt: str | None
    history: History
    faults: list[FaultRecord]
    """Injections so far, in order."""
    upcoming: list[tuple[str, str]]
    """(fault label, its trigger) of faults still waiting to fire."""
    run_dir: Path | None = None
    """The run's folder (its name labels the run's metrics)."""


@dataclass(frozen=True)
class Stuck:
    """An attempt whose workers were spawned but whose ranks did not all join within the join timeout."""

    attempt: str
    joined: int
    world_size: int
    timeout_s: float
    first: bool = False
    """No attempt of the run had joined yet: only the SDK's hello said the script speaks the protocol."""

    @property
    def message(self) -> str:
        who = "no rank" if not self.joined else f"only {self.joined} of {self.world_size} ranks"
        said = f"attempt {self.attempt} spawned, {who} joined the process group within {self.timeout_s:g} s"
        if self.first:
            # Nothing has started yet, so a slow start-up cannot be told from a hang: say both.
            said += (" (its ranks loaded chaos.sdk but none has sent start yet: a rendezvous or init that hangs, "
                     "or a start-up longer than that; if start-up is slow, raise workload.join_timeout_s)")
        return said


@dataclass(frozen=True)
class Stall:
    """No rank has reported anything for ``stall_s`` while the job kept running."""

    idle_s: float
    stall_s: float
    last: Record

    @property
    def message(self) -> str:
        what = f"step {self.last.get('step')}" if self.last.ev == "step" else self.last.ev or "a record"
        return (f"no rank reported anything for {self.idle_s:.0f} s (workload.stall_s {self.stall_s:g}); the last "
                f"was {what} of attempt {self.last.attempt}: the job hangs where no collective timeout reaches "
                f"(a DataLoader worker, storage, a deadlock); 'py-spy dump' of a rank shows where")


@dataclass
class Progress:
    history: History = field(default_factory=History)
    """Every workload and harness record so far, time-ordered: what the checks judge at the end."""
    max_step: int = 0
    """Highest optimizer step any rank reported (or the output showed), over all attempts."""
    joined: dict[str, set[tuple[int | None, int | None]]] = field(default_factory=dict)
    """Attempt -> the (replica group, rank) of each rank that sent ``start`` or a ``step`` in it (joined the process
    group); the group is None outside a drop-replica job."""
    speaks: bool = False
    """Some rank was seen to speak the event protocol (``hello`` at SDK import, ``start`` or ``step``):
    from then on an attempt's silence before ``start`` means it is stuck, not that it cannot say."""
    spawned: dict[str, float] = field(default_factory=dict)
    """Attempt -> seconds since launch when the harness first saw one of its workers."""
    members: dict[str, set[tuple[str, int | None]]] = field(default_factory=dict)
    """Attempt -> the (node, rank) of every worker the harness saw in its round: its world size."""
    stuck: list[Stuck] = field(default_factory=list)
    """Attempts named stuck so far, each once."""
    heard_s: float | None = None
    """Seconds since launch when a rank last said anything (or a new round of workers appeared); None until
    the first record: a script that never speaks cannot be judged by its silence."""
    last_heard: Record | None = None

    def fold(self, workload: list[Record], logged: list[Record], seen: list[Record],
             now_s: float | None = None) -> list[Record]:
        """Take one poll's records (at ``now_s`` since launch): the ranks' events, what the harness
        logged, and steps seen in the output (already among ``logged``). Returns what triggers see as
        new: the workload's records and the steps seen from outside."""
        # First: the history relabels a round's attempts (History.align_attempts); what it holds is
        # what the triggers see.
        held = self.history.add(workload + logged)
        new = held[:len(workload)] + [record(r) for r in seen]
        for rec in new:
            ev = rec.get("ev")
            if ev == "step" and isinstance(rec.get("step"), int):
                self.max_step = max(self.max_step, rec["step"])
            if rec.source == "output":  # a step read from the script's output says nothing of the protocol
                continue
            if ev in ("start", "step"):
                # A step needs the process group as much as start does: a script that reports steps
                # without start has joined, and must not be named stuck for the start it never sends.
                # Keyed by replica group too: torchft's groups are worlds of their own whose ranks repeat
                # (each has a rank 0), and the harness counts an attempt's members by (node, rank).
                self.joined.setdefault(str(rec.get("attempt")), set()).add((rec.get("replica_group"), rec.get("rank")))
            if ev in ("hello", "start", "step"):
                self.speaks = True
        if new and now_s is not None:
            self.heard_s, self.last_heard = now_s, new[-1]
        return new

    def spawn(self, attempt: str, at_s: float, members: Iterable[tuple[str, int | None]]) -> None:
        """The harness saw workers of ``attempt`` (``at_s`` since launch): ``members``, their (node, rank)."""
        if attempt not in self.spawned and self.heard_s is not None:
            self.heard_s = max(self.heard_s, at_s)  # a restart is the job moving on: its start-up is not a stall
        self.spawned.setdefault(attempt, at_s)
        self.members.setdefault(attempt, set()).update(members)

    def world_size(self, attempt: str) -> int:
        """How many ranks the harness saw in ``attempt``'s round of workers (1 before it saw any)."""
        return len(self.members.get(attempt, ())) or 1

    @property
    def newest_attempt(self) -> str | None:
        return max(self.spawned, key=attempt_key) if self.spawned else None

    def newly_stuck(self, now_s: float, join_timeout_s: float) -> list[Stuck]:
        """Attempts that have just passed ``join_timeout_s`` since their spawn without all ranks joined.

        Only a workload seen to speak the protocol can be judged stuck by its silence: a rank said
        ``hello`` (the SDK does at import, before the process group exists, so a first attempt that
        hangs in init is named too) or some attempt sent ``start``/``step``. A script without the
        protocol is bounded only by ``timeout_s``.
        """
        if not self.speaks:
            return []
        named = {s.attempt for s in self.stuck}
        out = []
        for attempt, t_spawn in self.spawned.items():
            need = self.world_size(attempt)
            have = len(self.joined.get(attempt, ()))
            if have < need and attempt not in named and now_s - t_spawn > join_timeout_s:
                out.append(Stuck(attempt, have, need, join_timeout_s, first=not self.joined))
        self.stuck += out
        return out

    def stalled(self, now_s: float, stall_s: float | None) -> Stall | None:
        """The job went silent: nothing from any rank for more than ``stall_s`` since the last record or
        restart. A hang that a collective timeout ends restarts the ranks (and they speak again);
        one it does not reach (a DataLoader worker, a blocked write) is otherwise bounded only by
        ``timeout_s``."""
        if stall_s is None or self.heard_s is None or self.last_heard is None:
            return None
        idle = now_s - self.heard_s
        return Stall(idle, stall_s, self.last_heard) if idle > stall_s else None

    @property
    def still_stuck(self) -> bool:
        """A stuck attempt has still not completed its rendezvous: waiting longer only burns time."""
        return any(len(self.joined.get(s.attempt, ())) < self.world_size(s.attempt) for s in self.stuck)
