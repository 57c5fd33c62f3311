"""The harness's own records, typed: what it saw of the run from outside, each kind a class read by attribute.

The harness logs these to harness.jsonl (chaos.runtime.context.HarnessLog, the witness, the pointer watch); the
kinds are ``records.HARNESS_KINDS``, which no rank may write. Each class names the fields its kind carries, as
the harness writes them. A field reads None where the record lacks it or holds another type (a harness older than
the field, a history built by hand): no evidence, never a crash, and never a stand-in a check could take for a
reading. Whether a record is the harness's at all is ``Record.harness``; ``History.harness`` gives a check only
those. Importing chaos.evidence registers these classes with ``records.record`` (``Record.__init_subclass__``).
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar, overload

from chaos.evidence.records import Record

T = TypeVar("T")
NUMBER = (int, float)


class Field(Generic[T]):
    """One field of a harness record, read as written where it has one of ``types`` (a bool is no int, no number),
    else None. ``name``: the field's name in the record where it differs from the attribute's."""

    __slots__ = ("key", "types")

    def __init__(self, *types: type[T], name: str = "") -> None:
        self.types = types
        self.key = name

    def __set_name__(self, owner: type, name: str) -> None:
        self.key = self.key or name

    @overload
    def __get__(self, record: None, owner: type | None = None) -> "Field[T]": ...
    @overload
    def __get__(self, record: Record, owner: type | None = None) -> T | None: ...

    def __get__(self, record: Record | None, owner: type | None = None) -> Any:
        if record is None:
            return self
        value = record.get(self.key)
        if isinstance(value, bool) and bool not in self.types:
            return None
        return value if isinstance(value, self.types) else None


# The workers the harness saw (chaos.run.runner: the process tree of each node, polled).

class WorkerSpawn(Record):
    """The harness saw a rank's process appear: ``worker_pid`` on ``node`` (the harness's name for it), alive since
    ``started`` (the kernel's start time, on the node's clock), in its round of workers ``generation``; ``launch``
    is the CHAOS_LAUNCH of its environment (which container or launch of its node started it), None without one;
    ``independent``: the job's groups restart apart (a drop-replica job). ``attempt`` is the one its environment
    gave (relabelled to its round by ``History.align_attempts``)."""

    __slots__ = ()
    KIND = "worker_spawn"
    worker_pid = Field(int)
    started = Field(*NUMBER)
    node = Field(str)
    generation = Field(int)
    launch = Field(int)
    independent = Field(bool)


class WorkerExit(Record):
    """The harness saw a rank's process ``worker_pid`` on ``node`` gone (no longer in the node's process tree)."""

    __slots__ = ()
    KIND = "worker_exit"
    worker_pid = Field(int)
    node = Field(str)


# The job as a whole (chaos.run.runner, chaos.health.relaunch).

class Launch(Record):
    """The harness launched the job (``launch``: its number, from 0); a relaunch by the health monitor also says
    its shape: ``nproc_per_node``, the ``visible_devices`` it kept and the devices it ``excluded``, and why."""

    __slots__ = ()
    KIND = "launch"
    launch = Field(int)
    target = Field(str)
    nodes = Field(int)
    experiment = Field(str)
    nproc_per_node = Field(int)
    visible_devices = Field(list)
    excluded = Field(list)
    reason = Field(str)


class Exit(Record):
    """The job ended: its exit ``code`` as the target reports it, whether the harness stopped it (``timed_out``),
    and how long it ran (``wall_s``)."""

    __slots__ = ()
    KIND = "exit"
    code = Field(int)
    timed_out = Field(bool)
    wall_s = Field(*NUMBER)


class FaultInject(Record):
    """The harness injected fault ``fault`` (its label; ``kind``, ``index`` in the experiment): when it acted
    (``t_fault``) and what it did (``details``, the fault's own account)."""

    __slots__ = ()
    KIND = "fault_inject"
    fault = Field(str)
    kind = Field(str)
    index = Field(int)
    t_fault = Field(*NUMBER)
    details = Field(dict)


class FaultRevert(Record):
    """The harness reverted fault ``fault``; ``errors``: what could not be undone."""

    __slots__ = ()
    KIND = "fault_revert"
    fault = Field(str)
    kind = Field(str)
    index = Field(int)
    errors = Field(list)


class Stuck(Record):
    """Attempt ``attempt``'s workers were spawned but only ``joined`` of its ``world_size`` ranks joined within the
    join timeout (``message``: what the harness said of it)."""

    __slots__ = ()
    KIND = "stuck"
    joined = Field(int)
    world_size = Field(int)
    message = Field(str)


class Timeout(Record):
    """The harness stopped the job at the experiment's ``timeout_s``."""

    __slots__ = ()
    KIND = "timeout"
    timeout_s = Field(*NUMBER)


class Cmd(Record):
    """A command the harness ran (chaos.runtime.shell): its ``argv``, the ``cmdline`` to paste and run again, its
    exit code ``rc`` (-1: timed out; None: not run) and ``stderr``; ``dry_run``: only printed, never run."""

    __slots__ = ()
    KIND = "cmd"
    argv = Field(list)
    cmdline = Field(str)
    rc = Field(int)
    stderr = Field(str)
    dry_run = Field(bool)


# What faults wrote and saw (chaos.faults).

class XidWrite(Record):
    """The xid fault (``index``) wrote XID ``code`` for ``device`` (an index or a PCI bus id) into the monitor's
    ``sink``: its ``n``-th report, the kernel-log ``line`` as written."""

    __slots__ = ()
    KIND = "xid_write"
    fault = Field(str)
    index = Field(int)
    code = Field(int)
    device = Field(int, str)
    bus_id = Field(str)
    sink = Field(str)
    n = Field(int)
    line = Field(str)


class Slowfs(Record):
    """The slow-storage mount's account of fault ``fault`` (``index``): operations delayed (``ops_delayed``,
    ``delay_s``), stalled (``stalled_ops``, ``stall_s``) and failed (``failed_ops``; ``failures``: each failed operation
    as a dict of its time, op and file), and ``bytes_written``."""

    __slots__ = ()
    KIND = "slowfs"
    fault = Field(str)
    index = Field(int)
    ops_delayed = Field(int)
    delay_s = Field(*NUMBER)
    bytes_written = Field(int)
    stalled_ops = Field(int)
    stall_s = Field(*NUMBER)
    failed_ops = Field(int)
    failures = Field(list)


# Schedulers and clusters (chaos.targets.slurm, chaos.targets.kubernetes, chaos.faults.node_notready).

class SlurmDrain(Record):
    """The harness drained Slurm ``node`` (``reason``; the excluded ``device`` that asked for it), and whether it
    requeued the job then."""

    __slots__ = ()
    KIND = "slurm_drain"
    node = Field(str)
    reason = Field(str)
    device = Field(int, str)
    job_id = Field(str)
    requeued = Field(bool)


class SlurmJob(Record):
    """The job as ``scontrol show job`` said when its state changed: ``state``, ``reason``, its ``nodes`` and
    Slurm's count of its requeues (``restarts``)."""

    __slots__ = ()
    KIND = "slurm_job"
    job_id = Field(str)
    state = Field(str)
    reason = Field(str)
    nodes = Field(str)
    restarts = Field(int)
    exit_code = Field(str)
    flags = Field(list)


class NodeLaunch(Record):
    """The harness started one of the job's nodes ``node``: its process (``pid``, a container or namespace's
    ``address``); on Kubernetes its Job (``job``) and that Job's ``restart_policy`` and ``backoff_limit``; in a
    drop-replica job its ``replica_group`` and ``launch``."""

    __slots__ = ()
    KIND = "node_launch"
    node = Field(str)
    pid = Field(int)
    address = Field(str)
    container = Field(str)
    job = Field(str)
    restart_policy = Field(str)
    backoff_limit = Field(int)
    image = Field(str)
    replica_group = Field(int)
    launch = Field(int)


class KubeContainer(Record):
    """The harness saw a container of node ``node`` start: its ``pod`` (name and ``pod_uid``), ``container`` id,
    ``pid``, the kubelet's ``restart_count`` for it, and the Kubernetes node it ran on (``k8s_node``)."""

    __slots__ = ()
    KIND = "kube_container"
    node = Field(str)
    pod = Field(str)
    pod_uid = Field(str)
    container = Field(str)
    pid = Field(int)
    restart_count = Field(int)
    k8s_node = Field(str)


class KubeJob(Record):
    """Node ``node``'s Job (``job``) when its account changed: pods ``active``, ``failed`` (counted against its
    backoffLimit) and ``succeeded``, and ``gave_up``: the reason it failed for good (BackoffLimitExceeded)."""

    __slots__ = ()
    KIND = "kube_job"
    node = Field(str)
    job = Field(str)
    active = Field(int)
    failed = Field(int)
    succeeded = Field(int)
    gave_up = Field(str)


class KubeEvicted(Record):
    """The pods (``pods``, by name) the taint manager evicted while fault ``index`` held ``node`` NotReady, as the
    fault found them when it resumed the kubelet (``t_resume``)."""

    __slots__ = ()
    KIND = "kube_evicted"
    fault = Field(str)
    index = Field(int)
    node = Field(str)
    pods = Field(list)
    t_resume = Field(*NUMBER)


class KubeEvents(Record):
    """The cluster's Events of ``node`` around fault ``index`` (``events``: each ``{t, kind, reason, ...}`` as the
    API gave it), and whether it was Ready again (``ready_again``)."""

    __slots__ = ()
    KIND = "kube_events"
    fault = Field(str)
    index = Field(int)
    node = Field(str)
    ready_again = Field(bool)
    events = Field(list)


# Checkpoints, looked at by the harness (chaos.evidence.witness, chaos.evidence.pointer).

class CkptVerify(Record):
    """The witness looked at the checkpoint ``path`` when it saw a rank's ``seen`` event (``ckpt_commit``,
    ``ckpt_load``; written at ``t_event``, of ``step``): ``ok`` True or False, None when it could not judge (``gone``,
    or the verifier failed); its ``problems``, its ``format``, and with a scan its numbers (``scanned``)."""

    __slots__ = ()
    KIND = "ckpt_verify"
    path = Field(str)
    step = Field(int)
    seen = Field(str)
    t_event = Field(*NUMBER)
    ok = Field(bool)
    gone = Field(bool)
    pinned = Field(bool)
    format = Field(str)
    problems = Field(list)
    scanned = Field(dict, name="values")  # ``values`` is the mapping's own method


class WitnessIncomplete(Record):
    """The witness closed before every look it was asked for came back: ``answered`` of the ``sent``."""

    __slots__ = ()
    KIND = "witness_incomplete"
    sent = Field(int)
    answered = Field(int)


class CkptPointer(Record):
    """The pointer watch saw ``pointer`` move onto ``target`` (``path`` in the checkpoint directory; None: it named
    nothing readable) and judged it at once: ``whole`` True or False, None where it cannot be judged at a moment;
    ``problems``; ``hashed``: checksums read. ``lag_s``: how long since the previous look (the move happened in
    that window); ``look_s``: how long the look took."""

    __slots__ = ()
    KIND = "ckpt_pointer"
    pointer = Field(str)
    target = Field(str)
    path = Field(str)
    step = Field(int)
    whole = Field(bool)
    problems = Field(list)
    hashed = Field(bool)
    lag_s = Field(*NUMBER)
    look_s = Field(*NUMBER)


class PointerWatch(Record):
    """The pointer watch of ``pointer`` (its path) changed ``state``: ``start``, ``end`` (with its ``polls``, the
    ``moves`` it saw and the longest gap between two looks, ``max_gap_s``) or ``error`` (``error``: why it stopped)."""

    __slots__ = ()
    KIND = "pointer_watch"
    pointer = Field(str)
    state = Field(str)
    error = Field(str)
    interval_s = Field(*NUMBER)
    polls = Field(int)
    moves = Field(int)
    max_gap_s = Field(*NUMBER)


class PointerOrder(Record):
    """The filesystem's own record of pointer ``pointer``'s moves (the slow-storage mount's op log, ``oplog``): each
    move at the operation that made it (``moves``: dicts as chaos.evidence.pointer.order_of writes them), or
    ``error``: why the log could not be read."""

    __slots__ = ()
    KIND = "pointer_order"
    pointer = Field(str)
    oplog = Field(str)
    ops = Field(int)
    error = Field(str)
    moves = Field(list)
