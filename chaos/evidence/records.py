"""The run's records, parsed once where they are read: typed, frozen, and still readable as mappings.

Every line the ranks write and every record the harness logs becomes one ``Record`` when it is read.
A workload line that breaks the event protocol is a named ``ProtocolError`` then, never a default
later: a ``step`` without an integer step number would otherwise count as step 0 and quietly change
a verdict. So is a workload line without ``ev``, or one that claims what only the harness writes (a
kind of ``HARNESS_KINDS``, ``source: harness``): a rank's own file cannot vouch for itself. A record cannot be changed after it is read. No check can alter what another check or a
trigger reads; the one correction the harness makes (an attempt relabelled to its round of workers,
``History.align_attempts``) makes a new record that keeps the reported attempt beside it.

Records read as mappings (``r["step"]``, ``r.get("samples")``), with the typed attributes of their
kind beside (``Step.step``, ``Step.samples``, ``Record.attempt`` as an ``Attempt``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any, ClassVar

_NUMBER = (int, float)
PROTOCOL: dict[str, dict[str, tuple[type, ...]]] = {
    # What the checks read of each workload event, and the type it must have (docs/architecture.md, "The event protocol").
    "hello": {},
    "start": {},
    "step": {"step": (int,), "epoch": (int,)},
    "ckpt_begin": {"step": (int,), "path": (str,)},
    "ckpt_staged": {"step": (int,)},
    "ckpt_durable": {"step": (int,), "path": (str,)},
    "ckpt_commit": {"step": (int,), "path": (str,)},
    "ckpt_error": {"step": (int,)},
    "ckpt_load": {"step": (int,)},
    "ckpt_reject": {"path": (str,)},
    "final": {"step": (int,)},
}
COMMON: dict[str, tuple[type, ...]] = {"t": _NUMBER, "attempt": (str,), "rank": (int,)}

HARNESS_KINDS = frozenset({
    # Kinds only the harness writes, to harness.jsonl (chaos.runtime.context.HarnessLog and the witness): the
    # checks take them as the harness's own evidence, so a workload line of one of these kinds would
    # vouch for itself. tests/unit/evidence/test_records.py keeps this list equal to what chaos/ logs.
    "launch", "exit", "timeout", "stuck", "stalled", "harness_error", "live_view_error", "gameday_stop",
    "fault_inject", "fault_revert", "fault_error", "worker_spawn", "worker_exit", "stray_processes",
    "ckpt_verify", "witness_incomplete", "cmd", "capability", "ckpt_mount", "xid_write", "straggler_cycles",
    "nodes", "node_launch", "docker_image", "slurm_submit", "slurm_job", "slurm_step", "slurm_requeue",
    "slurm_drain", "slurm_drain_failed", "slurm_cluster_up", "slurm_cluster_down", "slurm_daemon",
    "host_speed", "oom_limit", "oom_kill", "lighthouse", "replica_back", "workload_exit", "slowfs",
    "ckpt_pointer", "pointer_watch", "pointer_order", "kube_lock", "kube_daemon", "kube_cluster_up", "kube_container",
    "kube_read_error", "kube_job", "kube_pod_start", "kube_evicted", "kube_events", "blocked",
})
RESERVED_SOURCES = frozenset({"harness", "output"})
"""``source`` values only the harness sets: its own records, and steps it read from the workload's output."""
RESERVED_FIELDS = frozenset({"attempt_reported", "host_reported"})
"""Fields only the harness sets on a workload's record (``Record.relabeled``, ``Record.on_node``)."""


class ProtocolError(ValueError):
    """A workload record that breaks the event protocol; the message names the field and what was wrong."""


def record_problem(data: Mapping[str, Any]) -> str | None:
    """Why a workload record breaks the event protocol (a missing or mistyped field, a kind or field
    only the harness may write), or None. For the workload's own event files: harness.jsonl is the
    harness's, and is read without it."""
    ev = data.get("ev")
    if not isinstance(ev, str):
        if "ev" not in data and "event" in data:
            return "no 'ev' name (the line says 'event': the protocol names a record's kind 'ev')"
        return "no 'ev' name" if "ev" not in data else f"'ev' must be str, got {data['ev']!r}"[:80]
    if ev in HARNESS_KINDS:
        return (f"{ev} event: a kind only the harness writes (to harness.jsonl); a workload line cannot "
                f"carry it")
    if data.get("source") in RESERVED_SOURCES:
        return (f"{ev} event: 'source' {data['source']!r} is reserved to records the harness writes itself; "
                f"a workload line cannot claim it")
    for name in RESERVED_FIELDS & data.keys():
        return f"{ev} event: '{name}' is a field only the harness sets; a workload line cannot carry it"
    required = {**COMMON, **PROTOCOL.get(ev, {})}
    for name, types in required.items():
        value = data.get(name)
        if not isinstance(value, types) or isinstance(value, bool):
            kinds = " or ".join(t.__name__ for t in types)
            got = "missing" if name not in data else f"got {value!r}"[:60]
            return f"{ev} event: '{name}' must be {kinds}, {got}"
    samples = data.get("samples")
    if ev == "step" and samples is not None and (
            not isinstance(samples, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in samples)):
        return "step event: 'samples' must be a list of dataset indices (integers)"
    # Flags a check reads as evidence of what a step did not do: only true or false, never a truthy stand-in.
    for name in ("skipped", "participating"):
        if ev == "step" and name in data and not isinstance(data[name], bool):
            return f"step event: '{name}' must be true or false, got {data[name]!r}"[:120]
    return None


def attempt_key(attempt: Any) -> tuple[int, ...]:
    """Order attempts ``"0.2" < "0.10" < "1.0"`` numerically; one that is not ``N.M`` sorts last."""
    try:
        return tuple(int(x) for x in str(attempt).split("."))
    except ValueError:
        return (1 << 30,)


class Attempt(str):
    """An attempt id, ``"<launch>.<restart>"``: the harness's launch number (a relaunch without a
    device, a Slurm requeue) and torchrun's restart count. It is still the string the workload
    wrote, so it keys dicts and compares equal to ``"0.1"``; it orders numerically ("0.2" < "0.10")."""

    __slots__ = ()

    @property
    def key(self) -> tuple[int, ...]:
        return attempt_key(self)

    @property
    def launch(self) -> int | None:
        key = self.key
        return key[0] if len(key) == 2 else None

    @property
    def restart(self) -> int | None:
        key = self.key
        return key[1] if len(key) == 2 else None

    def __lt__(self, other: object) -> bool:
        return self.key < attempt_key(other)

    def __le__(self, other: object) -> bool:
        return self.key <= attempt_key(other)

    def __gt__(self, other: object) -> bool:
        return self.key > attempt_key(other)

    def __ge__(self, other: object) -> bool:
        return self.key >= attempt_key(other)


KINDS: dict[str, type["Record"]] = {}
"""Each kind's class, by ``ev``: every subclass of ``Record`` with a ``KIND`` registers itself as it is defined (the
harness's kinds in chaos.evidence.harness_records, which importing chaos.evidence brings in)."""


class Record(Mapping[str, Any]):
    """One record of the run. Read-only: its fields are fixed when it is read."""

    __slots__ = ("_data",)
    KIND: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        kind = cls.__dict__.get("KIND")
        if kind is None:
            return
        # Two classes for one kind: which one a record got would depend on the order of imports.
        known = KINDS.get(kind)
        if known is not None and (known.__module__, known.__qualname__) != (cls.__module__, cls.__qualname__):
            raise TypeError(f"record kind {kind!r} has two classes: {known.__qualname__} and {cls.__qualname__}")
        KINDS[kind] = cls

    def __init__(self, data: Mapping[str, Any]) -> None:
        fields = dict(data)
        if isinstance(fields.get("attempt"), str):
            fields["attempt"] = Attempt(fields["attempt"])
        object.__setattr__(self, "_data", MappingProxyType(fields))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"a {type(self).__name__} record is read-only")

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    # The checks query every record of a run many times: these stay one call into the dict.
    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def keys(self) -> Any:
        return self._data.keys()

    def items(self) -> Any:
        return self._data.items()

    def values(self) -> Any:
        return self._data.values()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({dict(self._data)!r})"

    def __reduce__(self) -> Any:  # copy and pickle make the same kind of record
        return (type(self), (dict(self._data),))

    def to_dict(self) -> dict[str, Any]:
        """A plain, JSON-ready copy (the attempt as a plain string)."""
        return {k: (str(v) if isinstance(v, Attempt) else v) for k, v in self._data.items()}

    @property
    def ev(self) -> str:
        return self._data.get("ev", "")

    @property
    def t(self) -> float:
        return self._data.get("t", 0.0)

    @property
    def attempt(self) -> Attempt | None:
        return self._data.get("attempt")

    @property
    def rank(self) -> int | None:
        return self._data.get("rank")

    @property
    def source(self) -> str | None:
        """``harness`` for the harness's own records, ``output`` for a step seen in the output, else None."""
        return self._data.get("source")

    @property
    def harness(self) -> bool:
        """The harness wrote this record itself (harness.jsonl, or its log live): the one rule by which a record
        is the harness's evidence rather than a rank's word. It rests on ``source``, which the harness's log sets
        and a rank's line cannot: ``parse`` refuses ``source: harness``, and every kind of ``HARNESS_KINDS``, from
        the workload's files, so a rank's claim never reaches a history."""
        return self._data.get("source") == "harness"

    def relabeled(self, attempt: str) -> "Record":
        """This record as part of ``attempt``, keeping the attempt it reported as ``attempt_reported``."""
        fields = dict(self._data)
        fields.setdefault("attempt_reported", fields.get("attempt"))
        fields["attempt"] = attempt
        return type(self)(fields)

    def on_node(self, node: str) -> "Record":
        """This record as written on the harness's node ``node``, keeping the host it wrote as ``host_reported``."""
        fields = dict(self._data)
        fields.setdefault("host_reported", fields.get("host"))
        fields["host"] = node
        return type(self)(fields)

    def as_written(self) -> "Record":
        """This record with the host and attempt its process wrote (what ``on_node`` and ``relabeled`` kept)."""
        if "host_reported" not in self._data and "attempt_reported" not in self._data:
            return self
        fields = dict(self._data)
        for name in ("host", "attempt"):
            if f"{name}_reported" in fields:
                fields[name] = fields.pop(f"{name}_reported")
        return type(self)(fields)


class _field:
    """A protocol field read as an attribute: what the record says, None where it leaves the field out (as
    ``Record.get``). ``required``: a field the protocol holds every record of its kind to (``PROTOCOL``), read
    without a default: a record built without it is a KeyError, never a made-up value."""

    __slots__ = ("name", "required")

    def __init__(self, name: str, required: bool = False) -> None:
        self.name, self.required = name, required

    def __get__(self, r: Any, owner: Any = None) -> Any:
        if r is None:
            return self
        return r._data[self.name] if self.required else r._data.get(self.name)


class _Workload(Record):
    """A record of the event protocol: every kind carries the process that wrote it and the world size it had
    then (docs/architecture.md, "Every record"); a step the harness read from the output carries what it logged."""

    __slots__ = ()
    pid = _field("pid")
    host = _field("host")
    world_size = _field("world_size")


class Start(_Workload):
    __slots__ = ()
    KIND = "start"
    dataset_size = _field("dataset_size")
    local_rank = _field("local_rank")
    device = _field("device")
    num_replica_groups = _field("num_replica_groups")
    """A drop-replica job's (chaos.integrations.torchft): how many replica groups it trains with."""


class Step(_Workload):
    __slots__ = ()
    KIND = "step"
    step = _field("step", required=True)
    samples = _field("samples")
    """The dataset indices this rank consumed in the step, when the workload says."""
    loss = _field("loss")
    # A drop-replica job's steps (chaos.integrations.torchft): its group, the quorum's size, whether this group's
    # own batch went into the step, and the group's weight checksum.
    replica_group = _field("replica_group")
    participants = _field("participants")
    participating = _field("participating")
    digest = _field("digest")

    @property
    def epoch(self) -> int:
        return self._data.get("epoch", 0)

    @property
    def skipped(self) -> bool:
        """The workload dropped the step's update (a guard's skip, a loss scaler's overflow): its samples were
        consumed but never trained on."""
        return self._data.get("skipped") is True


class _Checkpoint(_Workload):
    __slots__ = ()
    step = _field("step")
    path = _field("path")


class CkptStaged(_Checkpoint):
    __slots__ = ()
    KIND = "ckpt_staged"
    seconds = _field("seconds")
    bytes = _field("bytes")


class CkptBegin(_Checkpoint):
    __slots__ = ()
    KIND = "ckpt_begin"
    reason = _field("reason")
    """``"preempt"`` for a save on SIGTERM."""


class CkptDurable(_Checkpoint):
    __slots__ = ()
    KIND = "ckpt_durable"


class CkptCommit(_Checkpoint):
    __slots__ = ()
    KIND = "ckpt_commit"
    seconds = _field("seconds")
    bytes = _field("bytes")


class CkptLoad(_Checkpoint):
    __slots__ = ()
    KIND = "ckpt_load"


class CkptReject(_Checkpoint):
    __slots__ = ()
    KIND = "ckpt_reject"
    reason = _field("reason")


class CkptError(_Checkpoint):
    __slots__ = ()
    KIND = "ckpt_error"
    error = _field("error")


class Final(_Workload):
    __slots__ = ()
    KIND = "final"
    step = _field("step", required=True)
    digest = _field("digest")


class Health(_Workload):
    __slots__ = ()
    KIND = "health"
    code = _field("code")
    device = _field("device")
    action = _field("action")
    # A straggler or link monitor's (source "straggler" or "link", chaos.health): the rank it named, how much slower.
    slow_rank = _field("slow_rank")
    ratio = _field("ratio")


class Instep(_Workload):
    """An in-step fault acted in this rank (chaos.instep): ``fault`` is its index, ``step`` the step being computed."""

    __slots__ = ()
    KIND = "instep"
    fault = _field("fault")
    kind = _field("kind")
    where = _field("where")
    step = _field("step")
    taints_from = _field("taints_from")
    """For a fault written between two steps: the step reported before it acted (its checkpoint may hold it)."""


class Heal(_Workload):
    __slots__ = ()
    KIND = "heal"
    step = _field("step")
    replica_group = _field("replica_group")
    participants = _field("participants")


class Discard(_Workload):
    __slots__ = ()
    KIND = "discard"
    step = _field("step")
    epoch = _field("epoch")
    samples = _field("samples")
    replica_group = _field("replica_group")


class Monitor(_Workload):
    __slots__ = ()
    KIND = "monitor"
    initial_s = _field("initial_s")
    subsequent_s = _field("subsequent_s")


class InprocessRestart(_Workload):
    __slots__ = ()
    KIND = "inprocess_restart"
    iteration = _field("iteration")
    cause = _field("cause")


def record(data: Mapping[str, Any]) -> Record:
    """The typed record of ``data`` as it is (the harness's own records; histories built in tests)."""
    if isinstance(data, Record):
        return data
    return KINDS.get(data.get("ev"), Record)(data)


def parse(data: Mapping[str, Any]) -> Record:
    """A workload's record, held to the event protocol: the typed record, or a ``ProtocolError`` naming the problem."""
    problem = record_problem(data)
    if problem:
        raise ProtocolError(problem)
    return record(data)
