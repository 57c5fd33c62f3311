"""Inside a rank: the in-step faults the harness armed (chaos.instep.command), applied through torch's own
global hooks, so the same mechanism works for the reference workloads, the HF Trainer, Lightning,
Accelerate and a user's own loop.

Idle (nothing armed, or armed and not yet due) it costs one optimizer step hook per step, which
``stat``s the command folder (ci/bench/instep_overhead.py measures it). A command is picked up at the
next step boundary: the optimizer's step, or ``chaos.sdk.step`` after the harness released a held step,
so an ``at_step: N`` fault acts in step N+1, the first step computed after the trigger. Each
application writes an ``instep`` event (fault, kind, where, step, rank): where the fault landed is
evidence the checks read, not an assumption.

What each ``where`` does, on the ranks the command names:
- ``loss``: the outermost module's output (every floating tensor in it) multiplied by the value
  (NaN, Inf, or a loss spike's factor): the loss, its gradients and the all-reduced gradients follow;
- ``grad``: the gradients of the chosen parameter, as backward computes them, before any all-reduce
  (a NaN on one rank poisons every rank through the average);
- ``param``, ``optimizer_state``: one element of the chosen tensor, written between two steps;
- ``grad_local``: one element of a gradient after the all-reduce, on this rank only (the optimizer's input);
- ``forward``: the outermost forward raises (an out-of-memory error, as CUDA's allocator raises it);
- ``allocate``: the outermost forward allocates host memory (under the memory limit the harness set,
  the kernel's OOM killer ends the rank);
- ``allreduce``: DDP's gradient all-reduce fails or never completes on this rank (chaos.instep.comm);
- ``nvrx``: NVIDIA Resiliency Extension's own injector fires its fault (chaos.faults.nvrx_fault) ``delay_s``
  after the step boundary, from its own thread.
"""

from __future__ import annotations

import math
import os
import threading
import weakref
from typing import Any

import torch

from chaos import sdk
from chaos.instep.command import DIR_ENV, RANK_BASE_ENV, Command, applied, count_applied, read_all

_runtime: "Runtime | None" = None


def install() -> "Runtime | None":
    """Install the hooks once per process; None where the run armed no in-step fault."""
    global _runtime
    folder = os.environ.get(DIR_ENV)
    if _runtime is None and folder:
        _runtime = Runtime(folder, int(os.environ.get(RANK_BASE_ENV, "0")) + int(os.environ.get("RANK", "0")))
        _runtime.install()
    return _runtime


class Runtime:
    def __init__(self, folder: str, rank: int) -> None:
        self.folder = folder
        self.rank = rank
        self._mtime: int | None = None
        self.armed: dict[int, Command] = {}
        """Commands for this rank, by fault index, that still have steps to act."""
        self._optimizers: "weakref.WeakSet[torch.optim.Optimizer]" = weakref.WeakSet()
        self._steps = 0
        """Optimizer steps this process has taken (for a loop that reports none through chaos.sdk)."""
        self._acted_at: dict[int, int] = {}
        """The step boundary (optimizer steps so far) at which each between-steps fault last acted: once per boundary."""
        self._forward_hooks: list[Any] = []
        self._grad_hooks: dict[int, list[Any]] = {}
        self._stale: list[Any] = []
        self._handles: list[Any] = []
        self._depth = threading.local()

    # ---- step boundaries -------------------------------------------------------------------

    def install(self) -> None:
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

        # Idle, a step costs the post hook and one stat of the folder (by the sdk's callback where the script
        # reports its steps, by the post hook otherwise); the pre hook is there only while a fault needs it.
        self._register_pre = register_optimizer_step_pre_hook
        self._handles = [register_optimizer_step_post_hook(self._after_optimizer)]
        self._pre_hook: Any = None
        sdk.after_step(self._after_reported_step)
        from chaos.instep.comm import patch_ddp

        patch_ddp(self)

    def uninstall(self) -> None:
        """Remove every hook (tests; a process keeps its runtime for life)."""
        for cmd in list(self.armed):
            self._disarm(cmd)
        for handle in self._handles + self._stale + ([self._pre_hook] if self._pre_hook is not None else []):
            handle.remove()
        self._handles, self._stale, self._pre_hook = [], [], None
        sdk.forget_after_step(self._after_reported_step)

    def _after_reported_step(self, step: int) -> None:
        self.poll()

    def _before_optimizer(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        for cmd in list(self.armed.values()):
            if cmd.where == "grad_local":
                self._act_on_tensor(cmd, grad=True)

    def _after_optimizer(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        if self._steps == 0 or optimizer not in self._optimizers:
            self._optimizers.add(optimizer)
        self._steps += 1
        if sdk.last_step() is None:  # a loop that reports no steps: this is its step boundary
            self.poll()

    def step_now(self) -> int:
        """The step being computed: the one after the last the rank reported (or the optimizer counted)."""
        last = sdk.last_step()
        return (last if last is not None else self._steps) + 1

    def poll(self) -> None:
        """Pick up commands written or removed since the last look; act on what acts between steps."""
        while self._stale:
            self._stale.pop().remove()
        try:
            mtime = os.stat(self.folder).st_mtime_ns
        except FileNotFoundError:
            return
        if mtime != self._mtime:
            self._mtime = mtime
            present = {c.index: c for c in read_all(self.folder) if c.applies_to(self.rank)}
            for index in list(self.armed):
                if index not in present:
                    self._disarm(index)  # reverted by the harness
            for index, cmd in present.items():
                if index not in self.armed and (cmd.steps is None or applied(self.folder, index, self.rank) < cmd.steps):
                    self._arm(cmd)
        for cmd in list(self.armed.values()):
            if cmd.where == "nvrx":
                self._fire_nvrx(cmd)
            if cmd.where in ("param", "optimizer_state") and self._acted_at.get(cmd.index) != self._steps:
                self._acted_at[cmd.index] = self._steps
                self._act_on_tensor(cmd, grad=False)

    def _arm(self, cmd: Command) -> None:
        self.armed[cmd.index] = cmd
        if cmd.where == "grad_local" and self._pre_hook is None:
            self._pre_hook = self._register_pre(self._before_optimizer)
        if cmd.where in FORWARD and not self._forward_hooks:
            from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

            self._forward_hooks = [register_module_forward_pre_hook(self._before_forward),
                                   register_module_forward_hook(self._after_forward, always_call=True)]
        if cmd.where == "grad":
            param = self._tensor(cmd)
            if param is not None:
                self._grad_hooks[cmd.index] = [param.register_hook(lambda g, c=cmd: self._on_grad(c, g))]

    def _disarm(self, index: int) -> None:
        self.armed.pop(index, None)
        # Removed at the next poll, never from inside the hook that used the fault up.
        self._stale += self._grad_hooks.pop(index, [])
        if self._pre_hook is not None and not any(c.where == "grad_local" for c in self.armed.values()):
            self._stale.append(self._pre_hook)
            self._pre_hook = None
        if not any(c.where in FORWARD for c in self.armed.values()):
            for handle in self._forward_hooks:
                handle.remove()
            self._forward_hooks = []
            self._depth.n = 0  # a forward left by a raise or mid-way never runs its post hook

    # ---- acting ------------------------------------------------------------------------------

    def comm_fault(self) -> Command | None:
        """The collective-error or bucket bitflip armed for this rank, if any (chaos.instep.comm's hook asks)."""
        return next((c for c in self.armed.values() if c.where in COMM), None)

    def flip_bucket(self, cmd: Command, tensor: torch.Tensor, bucket: int) -> None:
        """Flip the bit of the reduced bucket (chaos.instep.comm calls it when the all-reduce completes)."""
        if cmd.index not in self.armed:
            return
        element = int(cmd.params.get("element", 0)) % max(1, tensor.numel())
        before = float(_element(tensor, element))
        _flip(tensor, element, int(cmd.params["bit"]))
        self._landed(cmd, bucket=bucket, element=element, before=_finite_or_text(before),
                     after=_finite_or_text(float(_element(tensor, element))))

    def landed(self, cmd: Command, **extra: Any) -> None:
        self._landed(cmd, **extra)

    def _landed(self, cmd: Command, **extra: Any) -> None:
        """One application: counted at once (a rank that dies of it, or exits on detecting it, has used it up,
        so the attempt that resumes does not meet it again), evidenced by an ``instep`` event."""
        count_applied(self.folder, cmd.index, self.rank)
        sdk.emit("instep", fault=cmd.index, kind=cmd.kind, where=cmd.where, step=self.step_now(), **extra)
        if cmd.steps is not None and applied(self.folder, cmd.index, self.rank) >= cmd.steps:
            self._disarm(cmd.index)

    def _fire_nvrx(self, cmd: Command) -> None:
        """Hand the fault to NVIDIA Resiliency Extension's own injector (chaos.faults.nvrx_fault): its thread acts
        ``delay_s`` later wherever the main thread is. Evidenced first: a SIGKILL or segfault leaves no chance after."""
        from nvidia_resiliency_ext.inprocess.tools import inject_fault as nvrx

        kind = nvrx.Fault[str(cmd.params["fault"])]
        delay = float(cmd.params.get("delay_s", 0.05))
        self._landed(cmd, nvrx_fault=kind.name, delay_s=delay)
        nvrx.dispatch_fault_injection(kind, delay, None)

    def _before_forward(self, module: torch.nn.Module, args: Any) -> None:
        depth = getattr(self._depth, "n", 0)
        self._depth.n = depth + 1
        if depth:
            return
        for cmd in list(self.armed.values()):
            if cmd.where == "forward":
                self._depth.n = 0  # the raise skips this forward's post hook
                error, allocator = _oom(cmd.params)
                self._landed(cmd, allocator=allocator)
                raise error
            if cmd.where == "allocate":
                self._landed(cmd)
                _allocate(float(cmd.params.get("gib", 2.0)))

    def _after_forward(self, module: torch.nn.Module, args: Any, output: Any) -> Any:
        self._depth.n = max(0, getattr(self._depth, "n", 1) - 1)
        if self._depth.n:
            return None
        for cmd in list(self.armed.values()):
            if cmd.where == "loss":
                output = _scaled(output, float(cmd.params["value"]))
                self._landed(cmd)  # one outermost forward per application (a micro-batch's NaN poisons its step)
        return output

    def _on_grad(self, cmd: Command, grad: torch.Tensor) -> torch.Tensor:
        if cmd.index not in self.armed:
            return grad
        self._landed(cmd)
        if cmd.kind == "bitflip":
            grad = grad.clone()
            _flip(grad, int(cmd.params.get("element", 0)), int(cmd.params["bit"]))
            return grad
        return grad * float(cmd.params["value"])

    def _act_on_tensor(self, cmd: Command, grad: bool) -> None:
        tensor = self._tensor(cmd)
        if tensor is None:
            return
        if grad:
            tensor = tensor.grad
            if tensor is None:
                return
        elif cmd.where == "optimizer_state":
            tensor = self._state_tensor(cmd, tensor)
            if tensor is None:
                return
        target = _local(tensor)
        element = int(cmd.params.get("element", 0)) % max(1, target.numel())
        with torch.no_grad():
            before = float(_element(target, element))
            if cmd.kind == "bitflip":
                _flip(target, element, int(cmd.params["bit"]))
            else:
                _element(target, element).fill_(float(cmd.params["value"]))
            after = float(_element(target, element))
        # Written between two steps, after the last one was reported: a checkpoint saved at that step (the save
        # follows the report) already holds it, so that step's checkpoint is tainted too.
        last = sdk.last_step() if not grad else None
        taints = {"taints_from": last} if last is not None else {}
        self._landed(cmd, element=element, before=_finite_or_text(before), after=_finite_or_text(after), **taints)

    def _tensor(self, cmd: Command) -> torch.Tensor | None:
        params = [p for opt in list(self._optimizers) for g in opt.param_groups for p in g["params"]]
        if not params:
            return None
        return params[int(cmd.params.get("tensor", 0)) % len(params)]

    def _state_tensor(self, cmd: Command, param: torch.Tensor) -> torch.Tensor | None:
        for opt in list(self._optimizers):
            state = opt.state.get(param)
            if state:
                key = cmd.params.get("state_key") or next((k for k, v in state.items()
                                                           if torch.is_tensor(v) and v.numel() > 1), None)
                value = state.get(key) if key is not None else None
                if torch.is_tensor(value):
                    return value
        return None


COMM = ("allreduce", "bucket")
"""Faults that act through the DDP communication hook (chaos.instep.comm)."""
FORWARD = ("loss", "forward", "allocate")
"""Faults that act in the outermost forward (the forward hooks are installed only while one is armed)."""


def _allocate(gib: float) -> None:
    """Allocate and touch ``gib`` of host memory (under a memory limit, the kernel's OOM killer ends the process
    here), then let it go (without a limit, the step goes on)."""
    block = torch.ones(int(gib * 2**30) // 4, dtype=torch.float32)
    del block


def _local(tensor: torch.Tensor) -> torch.Tensor:
    """A DTensor's (FSDP2's) local shard; the tensor itself otherwise."""
    to_local = getattr(tensor, "to_local", None)
    return to_local() if callable(to_local) else tensor


_INT_VIEW = {torch.float32: torch.int32, torch.float64: torch.int64, torch.float16: torch.int16,
             torch.bfloat16: torch.int16}


def _flip(tensor: torch.Tensor, element: int, bit: int) -> None:
    """Flip bit ``bit`` of element ``element`` in place (bit 30 of a float32: the top exponent bit)."""
    view = _INT_VIEW.get(tensor.dtype)
    if view is None:
        raise TypeError(f"bitflip: cannot flip a bit of a {tensor.dtype} tensor")
    width = torch.iinfo(view).bits
    if not 0 <= bit < width:
        raise ValueError(f"bitflip: bit {bit} is outside a {width}-bit {tensor.dtype} value")
    with torch.no_grad():
        word = _element(tensor, element).view(view)
        mask = torch.tensor(1 << bit if bit < width - 1 else -(1 << (width - 1)), dtype=view)
        word.bitwise_xor_(mask)


def _element(tensor: torch.Tensor, element: int) -> torch.Tensor:
    """A view of one element (flat index, modulo the size) of ``tensor`` in place, contiguous or not: a
    reshape of a non-contiguous tensor (a transposed weight, a slice) would be a copy, and a write to it lost."""
    element %= max(1, tensor.numel())
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(element), tensor.shape)) if tensor.dim() else ()
    return tensor.detach()[index]


def _scaled(output: Any, value: float) -> Any:
    """Every floating tensor in a module's output times ``value`` (tensors, tuples, lists, dicts, ModelOutputs)."""
    if torch.is_tensor(output):
        return output * value if output.is_floating_point() else output
    if isinstance(output, tuple) and hasattr(output, "_fields"):
        return type(output)(*(_scaled(v, value) for v in output))
    if isinstance(output, (tuple, list)):
        return type(output)(_scaled(v, value) for v in output)
    if isinstance(output, dict):
        copy = output.copy()
        for key in list(copy.keys()):
            copy[key] = _scaled(copy[key], value)
        return copy
    return output


def _oom(params: dict[str, Any]) -> tuple[BaseException, str]:
    """The out-of-memory error of an ``oom`` fault (mode cuda), and whose it is: ``cuda`` when CUDA's caching
    allocator raised it, ``injected`` when the harness made it (a rank that trains on CPU has no allocator to ask)."""
    size = float(params.get("gib", 2.0))
    if not params.get("message"):
        real = _cuda_oom(size)
        if real is not None:
            return real, "cuda"
    message = params.get("message") or (
        f"CUDA out of memory. Tried to allocate {size:.2f} GiB. GPU 0 has a total capacity of 79.10 GiB of which "
        f"1.21 GiB is free. (injected by chaos: the allocation failed the way CUDA's caching allocator reports it)")
    return torch.OutOfMemoryError(message), "injected"


def _cuda_oom(gib: float) -> BaseException | None:
    """On a rank that trains on CUDA, CUDA's own error: a real request to the caching allocator for more than the
    card holds (its capacity plus ``gib``). The allocator does all it does on any out-of-memory: frees its cached
    blocks and retries, counts it (``torch.cuda.memory_stats()["num_ooms"]``), calls the OOM observers (a stack
    that dumps a memory snapshot on OOM gets one), then raises. The request cannot be met, so nothing is held."""
    if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
        return None
    device = torch.cuda.current_device()
    ask = torch.cuda.get_device_properties(device).total_memory + int(gib * 2**30)
    try:
        block = torch.empty(ask, dtype=torch.uint8, device=device)
    except torch.OutOfMemoryError as exc:
        return exc
    del block  # a device that over-commits (no real card does): the harness's error instead
    return None


def _finite_or_text(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)
