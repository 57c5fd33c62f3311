"""Reading the event protocol: follow JSONL files as they grow, and query the merged history."""

from __future__ import annotations

import bisect
import json
import os
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, TypeVar

from chaos.evidence.records import ProtocolError, Record, attempt_key, parse, record, record_problem
from chaos.evidence.rounds import raised, round_labels as label_rounds

__all__ = ["HARNESS_LOG", "EventTail", "History", "ProtocolError", "Record", "attempt_key", "read_records",
           "record_problem"]

HARNESS_LOG = "harness.jsonl"
R = TypeVar("R", bound=Record)


class EventTail:
    """Follows every ``*.jsonl`` file in a directory, returning only complete new lines.

    A line still being written (no trailing newline yet) is kept back until it is whole, so a
    reader racing a writer never sees half a record.
    """

    def __init__(self, directory: str | os.PathLike[str], *, validate: bool = False) -> None:
        self.directory = Path(directory)
        self.validate = validate
        """Hold workload records to the protocol (``record_problem``); the harness's own need no check."""
        self._offsets: dict[Path, int] = {}
        self._partial: dict[Path, bytes] = {}
        self.bad_lines: list[str] = []
        """``file: problem: line`` for every line left out: not JSON, or breaking the protocol."""

    def poll(self) -> list[Record]:
        out: list[Record] = []
        try:
            paths = sorted(self.directory.glob("*.jsonl"))
        except OSError:
            return out
        for path in paths:
            out.extend(self._read_new(path))
        return out

    def _read_new(self, path: Path) -> Iterator[Record]:
        offset = self._offsets.get(path, 0)
        try:
            with open(path, "rb") as fh:
                fh.seek(offset)
                data = fh.read()
        except OSError:
            return
        if not data:
            return
        self._offsets[path] = offset + len(data)
        data = self._partial.pop(path, b"") + data
        lines = data.split(b"\n")
        if lines[-1]:
            self._partial[path] = lines[-1]
        for line in lines[:-1]:
            if not line.strip():
                continue
            text = line[:160].decode(errors="replace")
            try:
                data = json.loads(line)
            except json.JSONDecodeError:
                self.bad_lines.append(f"{path.name}: not JSON: {text}")
                continue
            # The harness's own log: a line of another shape is no record. A workload's file: every line
            # counts, and one without its kind (say, "event" for "ev") is a protocol break, never dropped.
            if not isinstance(data, dict):
                if self.validate:
                    self.bad_lines.append(f"{path.name}: not a JSON object: {text}")
                continue
            if "ev" not in data and not self.validate:
                continue
            try:
                yield parse(data) if self.validate else record(data)
            except ProtocolError as exc:
                self.bad_lines.append(f"{path.name}: {exc}: {text}")


def read_records(paths: Iterable[str | os.PathLike[str]], *, validate: bool = False,
                 bad_lines: list[str] | None = None) -> list[Record]:
    """Every well-formed record of the given files or directories, merged by ``t``; what was left out goes to ``bad_lines``."""
    records: list[Record] = []
    for p in paths:
        p = Path(p)
        tail = EventTail(p if p.is_dir() else p.parent, validate=validate)
        if p.is_dir():
            records.extend(tail.poll())
        elif p.exists():
            records.extend(tail._read_new(p))
        if bad_lines is not None:
            bad_lines.extend(tail.bad_lines)
    return sorted(records, key=lambda r: r.get("t", 0.0))


def _store_address(value: Any) -> bool:
    """Whether ``value`` is a store address as chaos.sdk writes it: ``host:port``."""
    if not isinstance(value, str) or ":" not in value:
        return False
    host, port = value.rsplit(":", 1)
    return bool(host) and port.isdigit()


LIFE_SLACK_S = 1.0
"""How far outside a worker's recorded life a record placed by its pid alone may fall (``History.node_of``)."""


def _t(r: Record) -> float:
    return r.get("t", 0.0)


@dataclass
class History:
    """The whole run as one time-ordered list of workload and harness records."""

    records: list[Record] = field(default_factory=list)
    malformed: list[str] = field(default_factory=list)
    """Workload lines left out of the history because they broke the protocol (see ``record_problem``)."""
    relabel: dict[tuple[str, int], str] = field(default_factory=dict)
    """(node, pid) -> the attempt of the round the harness saw that process in (see ``align_attempts``): one entry
    per worker the harness saw spawn, keyed by the harness's own name for its node."""
    _pid_nodes: dict[int, set[str]] = field(default_factory=dict, init=False, repr=False)
    """pid -> the nodes the harness saw a worker of that pid spawn on (see ``node_of``)."""
    _node_pids: dict[str, set[int]] = field(default_factory=dict, init=False, repr=False)
    """node -> the pids of the workers the harness saw spawn on it."""
    _written: dict[int, set[str]] = field(default_factory=dict, init=False, repr=False)
    """pid -> every ``host`` the workload's records of that pid wrote (as written)."""
    _lives: dict[tuple[str, int], list[tuple[float, float]]] = field(default_factory=dict, init=False, repr=False)
    """(node, pid) -> when each worker of that pid on that node lived, from the harness's spawn and exit records."""

    def __post_init__(self) -> None:
        self.records = sorted((record(r) for r in self.records), key=_t)
        for node, pid in self.relabel:
            self._spawned(node, pid)
        for r in self.records:
            self._note_host(r)
        self._index_lives()

    def _index_lives(self) -> None:
        """Each worker's life: from its process's start (``started``, on its node's clock as its records are; the
        spawn record's own time where a history has no start) to the harness's record of its exit (open while it
        ran on)."""
        lives: dict[tuple[str, int], list[tuple[float, float]]] = defaultdict(list)
        for r in self.records:
            if not r.harness or not isinstance(r.get("worker_pid"), int):
                continue
            key = (str(r.get("node")), r["worker_pid"])
            if r.get("ev") == "worker_spawn":
                started = r.get("started")
                lives[key].append((started if isinstance(started, (int, float)) else _t(r), float("inf")))
            elif r.get("ev") == "worker_exit" and lives[key] and lives[key][-1][1] == float("inf"):
                lives[key][-1] = (lives[key][-1][0], _t(r))
        self._lives = dict(lives)

    def _spawned(self, node: str, pid: int) -> None:
        self._pid_nodes.setdefault(pid, set()).add(node)
        self._node_pids.setdefault(node, set()).add(pid)

    def _note_host(self, r: Record) -> None:
        if not r.harness and isinstance(r.get("pid"), int):
            self._written.setdefault(r["pid"], set()).add(str(r.get("host_reported", r.get("host"))))

    def node_of(self, host: str, pid: Any, t: float | None = None) -> str | None:
        """The harness's name for the node of the worker that wrote ``host`` and ``pid``, where it can be proven.

        A rank that speaks the protocol through chaos.sdk writes the harness's node name (CHAOS_HOST), but a
        user's script that writes the records by hand fills ``host`` with ``socket.gethostname()``: on the local
        Slurm cluster every node shares the machine's hostname, and on real clusters a node's scheduler name and
        its hostname often differ (short against fully qualified, Slurm's NodeName against NodeHostname). The pid
        is what the harness and the process agree on. A record belongs to the worker the harness saw spawn with
        that pid on the node its host names; under another name, to the one node the harness saw a worker of that
        pid on, where the name is that node's as its own processes write it: the process wrote no other name (one
        process, one hostname), every other worker of that node that wrote a name other than the harness's wrote
        the same one, it is not the harness's name of another node, and the record (written at ``t``) falls in the
        life of a worker of that pid on that node. Anything else could be another machine's process whose pid
        collides (a pid the harness saw on two nodes, pods with PID namespaces of their own, a worker the harness
        never saw writing as a pid it saw elsewhere, before or after): not guessed (None), so the record keeps
        what it wrote."""
        if (host, pid) in self.relabel:
            return host
        nodes = self._pid_nodes.get(pid) if isinstance(pid, int) else None
        if nodes is None or len(nodes) != 1 or host in self._node_pids:
            return None
        node = next(iter(nodes))
        if self._written.get(pid, set()) != {host}:
            return None
        for other in self._node_pids[node]:
            names = self._written.get(other, set()) - {node}
            if names and names != {host}:
                return None
        # The process's start is read from the kernel to the boot time's whole second, and its exit is the harness's
        # record of it, on the harness's clock: a second either way.
        lives = self._lives.get((node, pid), [])
        if t is None or not any(lo - LIFE_SLACK_S <= t <= hi + LIFE_SLACK_S for lo, hi in lives):
            return None
        return node

    @classmethod
    def from_run_dir(cls, run_dir: str | os.PathLike[str]) -> "History":
        run_dir = Path(run_dir)
        malformed: list[str] = []
        records = read_records([run_dir / "events"], validate=True, bad_lines=malformed)
        records += read_records([run_dir / HARNESS_LOG])
        history = cls(records, malformed)
        history.align_attempts()
        return history

    def add(self, records: Iterable[Record | dict[str, Any]]) -> list[Record]:
        """Take new records (typed on the way in); returns them as the history holds them, in the
        order given: relabelled to their round's attempt where the harness knows better."""
        typed = [record(r) for r in records]
        for r in typed:
            self._note_host(r)
        new = [self._relabeled(r) for r in typed]
        if not new:
            return new
        ordered = sorted(new, key=_t)
        # Polled every 0.1 s for the whole run: new records mostly come after the old ones, and
        # then need no sort of everything.
        late = bool(self.records) and _t(ordered[0]) < _t(self.records[-1])
        self.records.extend(ordered)
        if late:
            self.records.sort(key=_t)
        return new

    def _relabeled(self, r: Record) -> Record:
        """``r`` placed where the harness saw its process: on its node (``host``, the written one kept as
        ``host_reported``) and in its round (``attempt``, likewise), judged afresh from what the process wrote."""
        if not self.relabel or r.harness:
            return r
        written = r.as_written()
        node = self.node_of(str(written.get("host")), written.get("pid"), _t(written))
        if node is None:
            # A process the harness never saw, or one it can no longer tell apart (its pid seen on a second node
            # since): as written. The ranks' own rounds (``reported_rounds``) may still place it.
            return written if "host_reported" in r else r
        placed = written.on_node(node) if str(written.get("host")) != node else written
        label = self.relabel[(node, written["pid"])]
        placed = placed.relabeled(label) if placed.get("attempt") != label else placed
        return r if placed == r else placed

    def set_attempt(self, node: str, pid: int, attempt: str) -> None:
        """Record that the worker ``pid`` the harness saw on ``node`` belonged to ``attempt``, and place what it
        already wrote (whatever host it wrote: ``node_of``)."""
        if self.relabel.get((node, pid)) == attempt:
            return
        self.relabel[(node, pid)] = attempt
        self._spawned(node, pid)
        for i, r in enumerate(self.records):
            if r.get("pid") == pid:
                self.records[i] = self._relabeled(r)

    def align_attempts(self) -> None:
        """One attempt id per round of workers, as the harness saw the rounds: the attempt rule that
        every check, figure and view reads (they all read this history).

        A record belongs to the round of workers the harness saw its process in, whatever attempt
        the process wrote; only a process the harness never saw keeps the label it wrote. The
        harness numbers the rounds it sees (a round starts when a worker appears while none of the
        previous round is alive: torchrun stops every worker of an agent before that agent joins
        the next rendezvous; under Slurm a requeue raises CHAOS_LAUNCH) and logs it on
        ``worker_spawn`` as ``generation``; every worker of a round gets the highest attempt the
        harness read for any of them (``launch.TORCHELASTIC_RESTART_COUNT`` from its environment), raised past the
        previous round's where that highest count repeats although a node's agent counted a restart in between
        (chaos/evidence/rounds.py).
        Two ways a process writes the wrong label: on a multi-node job only the agent whose worker
        failed counts a restart, so a peer that merely re-rendezvoused keeps its old count; and a
        user's script that labels its own attempts may keep one label across a Slurm requeue. Left
        alone, both make two rounds one attempt (the lineage would call the second an in-process
        reload, ``0.0#1``, and a check would read the requeued job's ``final`` as the preempted one's).
        """
        labelled_then = [r.get("attempt") for r in self.records]  # index-aligned: relabelling replaces in place
        self._index_lives()
        for spawn, label in self.round_labels():
            self.set_attempt(str(spawn.get("node")), spawn["worker_pid"], label)
        # Every record placed again now that all of them are in: a record placed live under a name its process
        # later contradicted (``node_of``: one process writes one name) is placed no more.
        for i, r in enumerate(self.records):
            self.records[i] = self._relabeled(r)
        windows = self.reported_rounds()
        if windows:  # one pass over the records, however many ranks
            starts = {key: [t for t, _ in w] for key, w in windows.items()}
            for i, r in enumerate(self.records):
                key = (str(r.get("host")), r.get("pid"))
                if r.harness or key not in windows:
                    continue
                # The process's round is that of its last start at or before the record (a pid numbered again in a
                # recreated pod is another process, in another round); what it wrote before its start, its first.
                label = windows[key][max(bisect.bisect_right(starts[key], _t(r)) - 1, 0)][1]  # type: ignore[index]
                if r.get("attempt") != label:
                    self.records[i] = r.relabeled(label)
        # The witness's looks carry the attempt of the event they looked at, as the event was labelled then: what
        # the rank wrote, or a label the runner gave it live (which may have changed again as the round's later
        # workers appeared). Where the event has been put in its round since (the rounds a rank reports are known
        # only at the end), so is the look: the check pairs them by path, time and attempt. An event is found by
        # kind, time and path; only where two share those does the attempt the look carries choose between them.
        events: dict[tuple[Any, Any, Any], list[tuple[set[Any], str]]] = defaultdict(list)
        for r, then in zip(self.records, labelled_then):
            if not r.harness and isinstance(r.get("path"), str):
                events[(r.get("ev"), r.get("t"), r.get("path"))].append(({r.get("attempt_reported"), then},
                                                                         r.get("attempt")))
        for i, r in enumerate(self.records):
            if r.get("ev") == "ckpt_verify" and r.harness:
                key = (r.get("seen"), r.get("t_event"), r.get("path"))
                if not all(isinstance(k, (str, int, float)) for k in key):
                    continue
                found = events.get(key, [])
                label = found[0][1] if len(found) == 1 else next(
                    (final for was, final in found if r.get("attempt") in was), None)
                if isinstance(label, str) and r.get("attempt") != label:
                    self.records[i] = r.relabeled(label)
        # The harness's own records of the workers: the spawn and exit of each relabelled process.
        for i, r in enumerate(self.records):
            if r.get("ev") in ("worker_spawn", "worker_exit"):
                label = self.relabel.get((str(r.get("node")), r.get("worker_pid")))  # type: ignore[arg-type]
                if label is not None and r.get("attempt") != label:
                    self.records[i] = r.relabeled(label)

    def round_labels(self) -> list[tuple[Record, str]]:
        """Each ``worker_spawn`` the harness logged, with the attempt of its round (see ``align_attempts``)."""
        spawns = [r for r in self.of("worker_spawn") if isinstance(r.get("generation"), int)
                  and isinstance(r.get("worker_pid"), int) and isinstance(r.get("attempt"), str)]
        rounds: dict[int, list[tuple[str, str]]] = defaultdict(list)
        for r in spawns:
            # What the worker reported (a second alignment reads the spawns the first relabelled).
            reported = r.get("attempt_reported")
            rounds[r["generation"]].append((str(r.get("node")), reported if isinstance(reported, str) else r["attempt"]))
        # A drop-replica job's groups restart apart (the runner says so on each spawn: ProcessTree.independent_nodes).
        labels = label_rounds(sorted(rounds.items()), independent=any(r.get("independent") is True for r in spawns))
        return [(r, labels[r["generation"]]) for r in spawns]

    def reported_rounds(self) -> dict[tuple[str, int], list[tuple[float, str]]]:
        """The attempt of each rank the harness never saw spawn (a cluster of the user's: no process tree), from
        the rounds the ranks report themselves: the ``rdzv_store`` of their ``start`` (chaos.sdk writes the address
        of the round's store, MASTER_ADDR:MASTER_PORT, which torchrun picks afresh for every rendezvous when the
        agent's store is not shared). Rounds do not overlap (every worker of a round is stopped before the next
        rendezvous completes), so consecutive starts naming one store are one round, unless a (host, local rank)
        starts twice in it (one round has one worker per local rank: the port was picked again), and each round
        gets the highest attempt any of its ranks wrote.

        Each (host, pid) gets the rounds it started in, by time: a recreated pod numbers its processes from 1
        again, so one pid may be two processes in two rounds. The rounds' labels must rise strictly in time order: a
        round whose label does not is raised one restart past the round before it (two rounds that shared one label
        would read as one attempt: a restart lost, a resume taken for an in-process reload)."""
        starts = [r for r in self.of("start") if isinstance(r.get("pid"), int) and isinstance(r.get("attempt"), str)
                  and _store_address(r.get("rdzv_store")) and (str(r.get("host")), r["pid"]) not in self.relabel]
        rounds: list[list[Record]] = []
        for r in starts:  # time order
            last = rounds[-1] if rounds else []
            if last and last[0]["rdzv_store"] == r["rdzv_store"] and not any(
                    (str(m.get("host")), m.get("local_rank")) == (str(r.get("host")), r.get("local_rank"))
                    and m["pid"] != r["pid"] for m in last):
                last.append(r)
            else:
                rounds.append([r])
        windows: dict[tuple[str, int], list[tuple[float, str]]] = defaultdict(list)
        previous: str | None = None
        for members in rounds:
            label = max((m["attempt"] for m in members), key=attempt_key)
            if previous is not None and attempt_key(label) <= attempt_key(previous):
                # Two rendezvous, two attempts, whatever the agents counted (on a multi-node job only the agent
                # whose worker failed counts: a kill on node 1, then on node 0, reports 0.1 twice).
                label = raised(previous)
                if attempt_key(label) <= attempt_key(previous):
                    return {}  # labels that are not launch.restart: nothing to raise them by
            previous = label
            for m in members:
                windows[(str(m.get("host")), m["pid"])].append((_t(m), label))
        return dict(windows)

    def of(self, *evs: str, attempt: str | None = None) -> list[Record]:
        return [r for r in self.records if r.get("ev") in evs and (attempt is None or str(r.get("attempt")) == attempt)]

    def harness(self, kind: type[R], attempt: str | None = None) -> list[R]:
        """The harness's own records of ``kind`` (a class of chaos.evidence.harness_records), in time order: only
        what it wrote itself (``Record.harness``), never a record that merely has the kind's name."""
        return [r for r in self.of(str(kind.KIND), attempt=attempt) if r.harness and isinstance(r, kind)]

    def attempts(self) -> list[str]:
        """Workload attempts that started at least one rank, in launch/restart order."""
        seen = {str(r["attempt"]) for r in self.records if r.get("ev") == "start" and "attempt" in r}
        return sorted(seen, key=attempt_key)

    def all_attempts(self) -> list[str]:
        """Attempts seen from inside (a rank sent ``start``) or outside (the harness saw a worker spawn)."""
        seen = set(self.attempts()) | {str(r["attempt"]) for r in self.of("worker_spawn") if "attempt" in r}
        return sorted(seen, key=attempt_key)

    def by_attempt(self, ev: str) -> dict[str, list[Record]]:
        out: dict[str, list[Record]] = defaultdict(list)
        for r in self.of(ev):
            out[str(r.get("attempt"))].append(r)
        return out

    def max_step(self, attempt: str | None = None, until: float | None = None) -> int:
        steps = [
            int(r["step"]) for r in self.of("step", attempt=attempt)
            if until is None or r.get("t", 0.0) <= until
        ]
        return max(steps, default=0)

    def attempt_ranks(self) -> dict[str, set[Any]]:
        """The ranks each attempt had: ``range(world_size)`` where its workload records carry one (every
        SDK record does), else every rank it was seen with, in its own records and the harness's worker
        spawns. What a check expects to hear from: a rank that reported nothing is still a rank."""
        sizes: dict[str, int] = {}
        seen: dict[str, set[Any]] = {}
        for r in self.records:
            attempt = r.get("attempt")
            if attempt is None or r.get("rank") is None or r.source == "output":
                continue
            seen.setdefault(str(attempt), set()).add(r.get("rank"))
            size = r.get("world_size")
            if isinstance(size, int) and not isinstance(size, bool) and size > 0 and not r.harness:
                sizes[str(attempt)] = max(size, sizes.get(str(attempt), 0))
        return {a: set(range(sizes[a])) if a in sizes else ranks for a, ranks in seen.items()}

    def end_step(self, attempt: str) -> int:
        """The step ``attempt`` ended at: its highest step, or, when it ran none, the step it loaded
        (a job restarted right after committing its last step loads it and has nothing left to train)."""
        own = self.max_step(attempt=attempt)
        if own:
            return own
        return max((r["step"] for r in self.of("ckpt_load", attempt=attempt) if isinstance(r.get("step"), int)),
                   default=0)

    def dataset_size(self) -> int | None:
        for r in self.of("start"):
            if isinstance(r.get("dataset_size"), int):
                return r["dataset_size"]
        return None

    def finals(self) -> list[Record]:
        return self.of("final")

    def final_attempt(self) -> str | None:
        finals = self.finals()
        if not finals:
            return None
        return max((str(r.get("attempt")) for r in finals), key=attempt_key)
