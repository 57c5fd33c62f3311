"""Report a GPU XID the way the NVIDIA driver does (kernel-log file, /dev/kmsg, simulated NVML or DCGM), once or as an ECC creep."""

from __future__ import annotations

import os
import threading
from typing import Any, Literal

from pydantic import Field, field_validator

from chaos.spec.configs import StrictConfig
from chaos.runtime.context import RunContext
from chaos.errors import CapabilityError, FaultError
from chaos.faults.base import Fault, FaultConfig
from chaos.health.monitor import SOURCE_ENV, visible_devices
from chaos.health.policy import classify
from chaos.health.xidline import bus_id_for, format_xid_line, index_for, normalise_bus_id

KERNEL_LOG = "kernel.log"
NVML_STATE = "nvml_state.json"


class RepeatConfig(StrictConfig):
    """Send the same XID again and again (a card whose ECC errors creep up)."""

    every_s: float = Field(gt=0, le=3600)
    """Seconds between reports."""
    count: int = Field(ge=2, le=10000)
    """Reports in total, the first included."""


class XidConfig(FaultConfig):
    code: int = Field(ge=1, le=1000)
    """XID number: 13/31/43 application, 48/64/74/79/94/119 hardware, 63/92 degrading (see docs/health.md)."""
    device: int | str = 0
    """GPU index (on CPU: the rank slot) or its PCI bus id, e.g. 0000:c1:00."""
    sink: Literal["file", "kmsg", "nvml", "dcgm"] = "file"
    """file: a kernel-log file in the run dir the monitor follows; kmsg: a real /dev/kmsg line (root + allow_kmsg); nvml: the simulated NVML device state; dcgm: dcgmi test --inject -f 230."""
    repeat: RepeatConfig | None = None
    """Report again every every_s seconds, count times in all (ECC creep); unset: once."""
    allow_kmsg: bool = False
    """Opt in to writing the real kernel log (sink kmsg). Without it the kmsg sink is refused."""
    node: int = Field(default=0, ge=0, le=63)
    """Multi-node targets: which of the nodes the job runs on now reports it (sink file: that node's own kernel-<node>.log)."""

    @field_validator("device")
    @classmethod
    def _device(cls, value: int | str) -> int | str:
        if isinstance(value, int):
            if value < 0:
                raise ValueError("device index must be >= 0")
            return value
        if value.strip().isdigit():
            return int(value)
        if normalise_bus_id(value) is None:
            raise ValueError(f"device must be an index or a PCI bus id like 0000:c1:00, got {value!r}")
        return normalise_bus_id(value)  # type: ignore[return-value]


def add_workload_source(run: RunContext, spec: str) -> None:
    """Ask the workload's health monitor to follow ``spec`` too (CHAOS_XID_SOURCE, comma-separated)."""
    env = run.workload_env
    current = env.get(SOURCE_ENV) or run.experiment.workload.env.get(SOURCE_ENV, "")
    specs = [s for s in current.split(",") if s]
    if spec not in specs:
        specs.append(spec)
    env[SOURCE_ENV] = ",".join(specs)


def device_owner(run: RunContext, device: int | None) -> int | None:
    """The local rank whose device is ``device`` in the current launch (CUDA_VISIBLE_DEVICES order), or None."""
    if device is None:
        return None
    env = {**run.experiment.workload.env, **run.workload_env}
    visible = visible_devices(env) or list(range(run.experiment.workload.nproc_per_node))
    return visible.index(device) if device in visible else None


class Xid(Fault, kind="xid"):
    """Report a GPU XID the way the NVIDIA driver does (kernel-log file, /dev/kmsg, simulated NVML or DCGM), once or as an ECC creep."""

    Config = XidConfig

    def __init__(self, config: XidConfig, index: int) -> None:
        super().__init__(config, index)
        self._stop = threading.Event()
        self._repeater: threading.Thread | None = None
        self._node: str | None = None

    @property
    def device_index(self) -> int | None:
        d = self.config.device
        return d if isinstance(d, int) else index_for(d)

    @property
    def bus_id(self) -> str:
        d = self.config.device
        return bus_id_for(d) if isinstance(d, int) else d

    def check(self, run: RunContext) -> None:
        c = self.config
        if c.sink == "kmsg":
            if not c.allow_kmsg:
                raise CapabilityError("the kmsg sink writes the host's real kernel log; opt in per experiment "
                                      "with allow_kmsg: true on this fault (staging nodes only), or use sink: file")
            if os.geteuid() != 0 or not os.access("/dev/kmsg", os.W_OK):
                raise CapabilityError("the kmsg sink needs root and a writable /dev/kmsg; run as root, or use sink: file")
        if c.sink == "dcgm":
            import shutil

            if shutil.which("dcgmi") is None:
                raise CapabilityError("the dcgm sink needs 'dcgmi' (DCGM): install datacenter-gpu-manager and start "
                                      "nv-hostengine, or use sink: file / nvml")
        if c.sink in ("nvml", "dcgm") and self.device_index is None:
            raise CapabilityError(f"sink {c.sink} addresses GPUs by index; bus id {c.device} is not one of the "
                                  f"simulated GPUs' (give device as an index)")

    @staticmethod
    def _multi_node(run: RunContext) -> bool:
        return run.target is not None and run.target.node_count > 1

    def _node_name(self, run: RunContext) -> str | None:
        """The node that reports the XID on a multi-node target (None on one node)."""
        if not self._multi_node(run):
            return None
        names = run.target.job_node_names()  # type: ignore[union-attr]
        if self.config.node >= len(names):
            raise FaultError(f"no node {self.config.node}: the job runs on {names}")
        return names[self.config.node]

    def _log_path(self, run: RunContext, node: str | None) -> os.PathLike[str]:
        # One simulated kernel log per node where the nodes share the run directory: every node's
        # monitor follows its own (file:...kernel-{host}.log), as each machine has its own dmesg.
        return run.run_dir / (KERNEL_LOG if node is None else f"kernel-{node}.log")

    def prepare(self, run: RunContext) -> None:
        c = self.config
        if c.sink == "file":
            if self._multi_node(run):
                add_workload_source(run, f"file:{run.run_dir / 'kernel-{host}.log'}")
            else:
                path = run.run_dir / KERNEL_LOG
                path.touch()
                add_workload_source(run, f"file:{path}")
        elif c.sink == "nvml":
            from chaos.health.nvml import init_sim_state

            path = run.run_dir / NVML_STATE
            if not path.exists():
                init_sim_state(str(path), max(run.experiment.workload.nproc_per_node, (self.device_index or 0) + 1))
            add_workload_source(run, f"nvml:{path}")
        else:
            add_workload_source(run, c.sink)

    def plan(self, run: RunContext) -> list[str]:
        c = self.config
        line = format_xid_line(c.code, self.bus_id)
        where = {"file": f"append to {run.run_dir / KERNEL_LOG}", "kmsg": "write to /dev/kmsg",
                 "nvml": f"record in {run.run_dir / NVML_STATE}",
                 "dcgm": f"dcgmi test --inject --gpuid {self.device_index} -f 230 -v {c.code}"}[c.sink]
        times = f", {c.repeat.count} times every {c.repeat.every_s:g} s" if c.repeat else ""
        return [f"xid: {where}: {line!r}{times}"]

    def _write(self, run: RunContext, n: int) -> str:
        c = self.config
        device = self.device_index
        pid = None
        if classify(c.code).category == "application":
            pid = self._owner_pid(run, device)
        line = format_xid_line(c.code, self.bus_id, pid=pid, name="python" if pid else None)
        if c.sink == "file":
            # dmesg's "[seconds since boot]" prefix, so tools that parse real logs parse this one.
            with open(self._log_path(run, self._node), "a", encoding="utf-8") as fh:
                fh.write(f"[{run.clock.mono():12.6f}] {line}\n")
        elif c.sink == "kmsg":
            fd = os.open("/dev/kmsg", os.O_WRONLY)
            try:
                os.write(fd, f"<3>{line}\n".encode())  # a real kernel-log record; it cannot be taken back
            finally:
                os.close(fd)
        elif c.sink == "nvml":
            from chaos.health.nvml import inject_sim_xid

            inject_sim_xid(str(run.run_dir / NVML_STATE), device, c.code)  # type: ignore[arg-type]
        else:
            run.shell.run(["dcgmi", "test", "--inject", "--gpuid", str(device), "-f", "230", "-v", str(c.code)])
        run.log("xid_write", fault=self.label, index=self.index, code=c.code, device=device, bus_id=self.bus_id,
                sink=c.sink, n=n, line=line)
        return line

    def _owner(self, run: RunContext, device: int | None):
        """The newest worker that holds ``device`` (on the reporting node, on a multi-node target)."""
        owner = device_owner(run, device)
        workers = [w for w in run.tree.workers() if (w.local_rank == owner if self._node else w.rank == owner)
                   and (self._node is None or w.node == self._node)]
        return max(workers, key=lambda w: w.key) if workers else None

    def _owner_pid(self, run: RunContext, device: int | None) -> int | None:
        w = self._owner(run, device)
        return w.pid if w else None

    def inject(self, run: RunContext) -> dict[str, Any]:
        c = self.config
        if self._repeater is not None and self._repeater.is_alive():
            raise FaultError(f"{self.label} is still repeating its previous injection; use one trigger per creep")
        device = self.device_index
        self._node = self._node_name(run)
        # Who owns the device is read before the XID is written: a monitor acting on it at once (an
        # exclude stops the node's launch) can take the owner out of the process tree before a look
        # after the write (seen: health_action then found "no rank owned device 0").
        owner = self._owner(run, device) if self._node else None
        rank = (owner.rank if owner else None) if self._node else device_owner(run, device)
        # Nothing to register for revert: a logged XID stays logged (like a real one); the repeats
        # stop on revert, and die with the harness if it is killed.
        line = self._write(run, 1)
        if c.repeat is not None:
            self._stop.clear()
            self._repeater = threading.Thread(target=self._repeat, args=(run,), daemon=True,
                                              name=f"xid-repeat-{self.index}")
            self._repeater.start()
        row = classify(c.code)
        return {"code": c.code, "device": device, "bus_id": self.bus_id, "sink": c.sink, "line": line,
                "node": self._node, "rank": rank, "category": row.category, "action": row.action.value,
                "repeat": c.repeat.model_dump() if c.repeat else None}

    def _repeat(self, run: RunContext) -> None:
        repeat = self.config.repeat
        for n in range(2, (repeat.count if repeat else 1) + 1):
            if self._stop.wait(repeat.every_s):  # type: ignore[union-attr]
                return
            try:
                self._write(run, n)
            except (OSError, FaultError) as exc:
                run.log("fault_error", fault=self.label, kind=self.kind, index=self.index, error=str(exc))
                return

    def revert(self, run: RunContext) -> list[Any]:
        self._stop.set()
        if self._repeater is not None:
            self._repeater.join(timeout=5)
        return super().revert(run)
