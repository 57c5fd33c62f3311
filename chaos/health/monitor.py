"""The health monitor a training process runs: follow XID sources, apply the policy, emit ``health`` events and act.

    from chaos import health
    mon = health.start_monitor(["file:/var/log/kern.log", "nvml"], rank=rank, local_rank=local_rank)
    ...  # in the loop, on every rank:  if mon.checkpoint_due(): save()

One thread per source emits and acts in the thread that read the line, so detection is bounded by
the source (5 ms for a file, a select wake-up for kmsg/journal), not by a polling period.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from chaos import sdk
from chaos.health.exclusions import add_exclusion, exclusions_path
from chaos.health.policy import Action, Decision, Policy
from chaos.health.sources import Sighting, Source, SourceUnavailable, open_source
from chaos.health.xidline import bus_id_for, index_for, normalise_bus_id

SOURCE_ENV = "CHAOS_XID_SOURCE"
"""Comma-separated sources the harness (or an operator) asks the workload's monitor to follow."""

APP_ERROR_EXIT = 75
"""Exit status of a rank restarted for an application XID (EX_TEMPFAIL: try again)."""
EXCLUDE_EXIT = 74
"""Exit status of a rank whose device was excluded (EX_IOERR: the device is gone)."""


def visible_devices(env: dict[str, str] | None = None) -> list[int] | None:
    """Physical device indices from CUDA_VISIBLE_DEVICES when it lists plain indices; None when unset or UUIDs."""
    env = os.environ if env is None else env
    raw = env.get("CUDA_VISIBLE_DEVICES")
    if raw is None or not raw.strip():
        return None
    parts = [p.strip() for p in raw.split(",")]
    return [int(p) for p in parts] if all(p.isdigit() for p in parts) else None


def my_device(local_rank: int, env: dict[str, str] | None = None) -> int:
    """The physical device (on CPU: the slot) this local rank uses."""
    visible = visible_devices(env)
    if visible is not None and local_rank < len(visible):
        return visible[local_rank]
    return local_rank


def _parent_is_torchrun() -> bool:
    try:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as fh:
            cmd = fh.read().replace(b"\0", b" ")
    except OSError:
        return False
    return b"torch.distributed.run" in cmd or b"torchrun" in cmd


@dataclass
class Actuator:
    """Carries out decisions in this process. ``exit`` and ``stop_launcher`` are injectable for tests."""

    rank: int
    exclusions_file: str
    exit: Callable[[int], None] = os._exit
    stop_launcher: Callable[[], None] | None = None
    checkpoint_requested: threading.Event = field(default_factory=threading.Event)

    def act(self, decision: Decision, bus_id: str) -> None:
        if decision.action is Action.RESTART:
            # The process dies the way a CUDA error would kill it: its peers' collectives fail and
            # torchrun restarts every rank from the last checkpoint.
            self.exit(APP_ERROR_EXIT)
        elif decision.action is Action.EXCLUDE:
            record_exclusion(self.exclusions_file, device=decision.device, code=decision.code, rank=self.rank,
                             bus_id=bus_id)
            # Restarting in place would put the same dead device back in the job: stop the whole
            # launch, so the scheduler (the harness's runner here) relaunches without the device.
            (self.stop_launcher or stop_torchrun)()
            self.exit(EXCLUDE_EXIT)
        elif decision.action is Action.CHECKPOINT:
            self.checkpoint_requested.set()


def record_exclusion(path: str, *, device: int | None, code: int | str, rank: int, **extra: Any) -> None:
    """Record ``device`` as taken out of service by this process (its host and attempt): the relaunch
    policy (chaos/health/relaunch.py) leaves it out of the next launch."""
    add_exclusion(path, {"device": device, **extra, "code": code, "rank": rank,
                         "host": os.environ.get("CHAOS_HOST") or socket.gethostname(),
                         "attempt": sdk.attempt_id(), "t": time.time()})


def stop_torchrun() -> None:
    if _parent_is_torchrun():
        os.kill(os.getppid(), signal.SIGTERM)


class HealthMonitor:
    """Follows ``sources`` in daemon threads; XIDs on ``device`` are decided by ``policy`` and acted on by ``actuator``.

    XIDs on other devices are another rank's business (every rank of a node reads the same log)
    and are dropped.
    """

    def __init__(self, sources: list[Source], *, device: int, rank: int, policy: Policy | None = None,
                 actuator: Actuator | None = None, emit: Callable[..., None] = sdk.health,
                 bus_id: str | None = None, resolve: Callable[[str], int | None] = index_for,
                 read_timeout_s: float = 0.5) -> None:
        self.sources = sources
        self.device = device
        self.rank = rank
        self.bus_id = bus_id or bus_id_for(device)
        self.policy = policy or Policy()
        self.actuator = actuator or Actuator(rank, str(exclusions_path()))
        self.emit = emit
        self.resolve = resolve
        self.read_timeout_s = read_timeout_s
        self.decisions: list[Decision] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def start(self) -> "HealthMonitor":
        for src in self.sources:
            t = threading.Thread(target=self._follow, args=(src,), name=f"chaos-health-{src.name}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def _follow(self, src: Source) -> None:
        while not self._stop.is_set():
            try:
                found = src.read(self.read_timeout_s)
            except (OSError, SourceUnavailable) as exc:
                self.errors.append(f"{src.name}: {exc}")
                print(f"chaos.health: source {src.name} failed, no longer followed: {exc}", file=sys.stderr)
                return
            for s in found:
                self.handle(s)

    def device_of(self, s: Sighting) -> int | None:
        if s.device is not None:
            return s.device
        if s.bus_id is None:
            return None
        if normalise_bus_id(s.bus_id) == normalise_bus_id(self.bus_id):
            return self.device
        return self.resolve(s.bus_id)

    def handle(self, s: Sighting) -> Decision | None:
        """Decide and act on one sighting if it is about this rank's device."""
        device = self.device_of(s)
        if device != self.device:
            return None
        with self._lock:  # two sources may report the same event at once: decide one at a time
            decision = self.policy.decide(s.code, device)
            self.decisions.append(decision)
            self.emit(source=s.source, code=s.code, device=device, action=decision.action.value,
                      bus_id=self.bus_id, category=decision.category, meaning=decision.meaning,
                      repeats=decision.repeats, line=s.raw[:300])
            self.actuator.act(decision, self.bus_id)
        return decision

    def checkpoint_due(self) -> bool:
        """True on every rank when any rank's device asked for a checkpoint now. A collective: call it on all ranks every step."""
        flag = 1 if self.actuator.checkpoint_requested.is_set() else 0
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            import torch

            device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else "cpu"
            t = torch.tensor([flag], dtype=torch.int32, device=device)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            flag = int(t.item())
        if flag:
            self.actuator.checkpoint_requested.clear()
        return bool(flag)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=self.read_timeout_s + 1)
        for src in self.sources:
            src.close()


def start_monitor(sources: list[str], *, rank: int | None = None, local_rank: int | None = None,
                  policy: Policy | None = None, **kwargs: Any) -> HealthMonitor:
    """Open ``sources`` (see ``open_source``) and start following them for this rank's device."""
    rank = int(os.environ.get("RANK", 0)) if rank is None else rank
    local_rank = int(os.environ.get("LOCAL_RANK", 0)) if local_rank is None else local_rank
    device = my_device(local_rank)
    opened, skipped = [], []
    for spec in sources:
        try:
            opened.append(open_source(spec))
        except SourceUnavailable as exc:
            # One missing source (no NVML on a CPU box) must not stop training; none at all is an error.
            skipped.append(f"{spec}: {exc}")
            print(f"chaos.health: source {spec} unavailable, not followed: {exc}", file=sys.stderr)
    if not opened:
        raise SourceUnavailable("no health source could be opened: " + "; ".join(skipped))
    bus_id, resolve = _bus_mapping(device, opened)
    monitor = HealthMonitor(opened, device=device, rank=rank, policy=policy, bus_id=bus_id, resolve=resolve,
                            **kwargs)
    monitor.errors.extend(skipped)
    return monitor.start()


def _bus_mapping(device: int, sources: list[Source]) -> tuple[str, Callable[[str], int | None]]:
    """Real bus ids when a real NVML source is open (a real driver's lines name real buses), else the simulated map."""
    from chaos.health.nvml import NvmlSource, RealNvml

    for src in sources:
        if isinstance(src, NvmlSource) and isinstance(src.nvml, RealNvml) and device < len(src.nvml.bus_ids):
            buses = src.nvml.bus_ids

            def resolve(bus: str) -> int | None:
                norm = normalise_bus_id(bus)
                return buses.index(norm) if norm in buses else index_for(bus)

            return buses[device], resolve
    return bus_id_for(device), index_for


def start_from_env(rank: int | None = None, local_rank: int | None = None) -> HealthMonitor | None:
    """The monitor ``$CHAOS_XID_SOURCE`` asks for, or None when it is unset (the workload runs unmonitored)."""
    spec = os.environ.get(SOURCE_ENV, "").strip()
    if not spec:
        return None
    return start_monitor([s for s in spec.split(",") if s.strip()], rank=rank, local_rank=local_rank)
