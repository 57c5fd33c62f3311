"""Benchmark: what an armed-but-idle in-step fault costs a training step, and how many steps the reference
workload's non-finite guard takes to catch each in-step fault.

1. Idle cost. With the in-step runtime installed (chaos.instep.rank: the bootstrap loaded it because the
   run arms an in-step fault, and the fault's trigger has not fired), every optimizer step calls two
   hooks and every reported step one callback; the poll ``stat``s the command folder. Whole training
   steps are too noisy on a shared 2-core box to see microseconds (ci/bench/sdk_event_cost.py), so
   the cost is measured where it is paid: ``optimizer.step()`` of a one-element model plus the
   reported-step callback, with the runtime installed and not, in interleaved rounds. Then the share
   of a training step it is, for the step times given and for the reference workload's own step
   (measured here, the same way interleaved). Goal (issue 34): at most 1 % of a step.
2. Detection latency. The reference workload's guard (workloads/trainkit/guard.py, policy restart) in
   one process (gloo, world size 1) over the reference model: each fault is armed after step K and the
   table gives the step it acted in, the step the guard stopped, and the latency in steps (an unarmed
   run beside it: the guard never fires).

    python ci/bench/instep_overhead.py [--rounds 7] [--steps 3000] [--step-ms 1.4 10 50 300]
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "workloads"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from chaos import sdk  # noqa: E402
from chaos.instep import rank as instep_rank  # noqa: E402
from chaos.instep.command import Command, write  # noqa: E402
from sidebyside import spread  # noqa: E402


def tiny_steps_us(n: int, runtime_on: bool, folder: Path) -> float:
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=0.0)
    p.grad = torch.zeros(1)
    rt = instep_rank.Runtime(str(folder), 0) if runtime_on else None
    if rt is not None:
        rt.install()
    try:
        start = time.perf_counter()
        for i in range(n):
            opt.step()
            sdk._last_step[0] = i  # what chaos.sdk.step does for a script that reports its steps
            for callback in sdk._after_step:
                callback(i)
        return (time.perf_counter() - start) / n * 1e6
    finally:
        if rt is not None:
            rt.uninstall()


def model_and_batch() -> tuple[torch.nn.Module, torch.optim.Optimizer, torch.Tensor, torch.Tensor]:
    from trainkit.model import build_model

    model = build_model(16, 64, 4, 0.1, 0)
    gen = torch.Generator().manual_seed(1)  # the same batch in every trial: the table is reproducible
    return (model, torch.optim.AdamW(model.parameters(), lr=0.01), torch.randn(4, 16, generator=gen),
            torch.randint(0, 4, (4,), generator=gen))


def reference_step_ms(n: int, runtime_on: bool, folder: Path) -> float:
    model, opt, x, y = model_and_batch()
    rt = instep_rank.Runtime(str(folder), 0) if runtime_on else None
    if rt is not None:
        rt.install()
    try:
        start = time.perf_counter()
        for i in range(n):
            F.cross_entropy(model(x), y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            sdk._last_step[0] = i
            for callback in sdk._after_step:
                callback(i)
        return (time.perf_counter() - start) / n * 1e3
    finally:
        if rt is not None:
            rt.uninstall()


def detection(folder: Path, command: Command | None, arm_after: int, limit: int) -> tuple[int | None, int | None]:
    """(step the fault acted in, step the guard stopped) on the reference model, world size 1."""
    from trainkit.guard import NonFiniteGuard, NonFiniteStep

    for f in folder.glob("fault-*.json"):
        f.unlink()
    for f in (folder / "applied").glob("*"):
        f.unlink()
    model, opt, x, y = model_and_batch()
    guard = NonFiniteGuard("restart", 0, 0, 1)
    params = list(model.parameters())
    rt = instep_rank.Runtime(str(folder), 0)
    rt.install()
    acted: list[int] = []
    real_emit = sdk.emit
    sdk.emit = lambda ev, **fields: acted.append(fields["step"]) if ev == "instep" else None  # type: ignore[assignment]
    try:
        for step in range(1, limit + 1):
            if step == arm_after + 1 and command is not None:
                write(str(folder), command)
                rt.poll()
            loss = F.cross_entropy(model(x), y, reduction="sum")
            loss.backward()
            try:
                guard.check(step, loss, params)
            except NonFiniteStep:
                return (acted[0] if acted else None), step
            opt.step()
            opt.zero_grad(set_to_none=True)
            sdk._last_step[0] = step
        return (acted[0] if acted else None), None
    finally:
        sdk.emit = real_emit  # type: ignore[assignment]
        rt.uninstall()


FAULTS = {
    "unarmed": None,
    "nan in the loss": Command(0, "nan", "loss", steps=1, params={"value": math.nan}),
    "inf in one gradient": Command(0, "nan", "grad", steps=1, params={"value": math.inf, "tensor": 2}),
    "nan in one weight": Command(0, "nan", "param", steps=1, params={"value": math.nan, "tensor": 0, "element": 3}),
    "bitflip, bit 30 of a weight": Command(0, "bitflip", "param", steps=1, params={"bit": 30, "tensor": 0, "element": 3}),
    "bitflip, bit 12 of a weight": Command(0, "bitflip", "param", steps=1, params={"bit": 12, "tensor": 0, "element": 3}),
    "loss spike x1e4, 3 steps": Command(0, "loss-spike", "loss", steps=3, params={"value": 1e4}),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--steps", type=int, default=3000, help="optimizer steps per round of the idle-cost loops")
    ap.add_argument("--step-ms", type=float, nargs="+", default=[1.4, 10.0, 50.0, 300.0])
    args = ap.parse_args()
    torch.set_num_threads(1)
    logging.getLogger("trainkit").setLevel(logging.ERROR)  # the guard's own warning, once per caught fault
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "instep"
        folder.mkdir()
        os.environ.pop(sdk.EVENTS_DIR_ENV, None)
        tiny = {True: [], False: []}
        ref = {True: [], False: []}
        for i in range(args.rounds):
            for on in ((True, False) if i % 2 == 0 else (False, True)):
                tiny[on].append(tiny_steps_us(args.steps, on, folder))
                ref[on].append(reference_step_ms(max(200, args.steps // 10), on, folder))
        cost_us = statistics.median(tiny[True]) - statistics.median(tiny[False])
        print(f"idle cost per step: {cost_us:.2f} us (optimizer.step of a 1-element model + the reported-step "
              f"callback: armed-idle {spread(tiny[True])} us vs not installed {spread(tiny[False])} us, "
              f"medians of {args.rounds} interleaved rounds x {args.steps} steps)")
        ref_ms = statistics.median(ref[False])
        print(f"reference workload step (MLP 16-64-64-4, AdamW, batch 4, 1 thread): armed-idle {spread(ref[True], 3)} ms "
              f"vs not installed {spread(ref[False], 3)} ms, ratio {statistics.median(ref[True]) / ref_ms:.3f} "
              f"(whole steps: noise dominates)")
        print()
        print(f"{'step':>10}  {'idle cost':>10}  {'share':>7}  goal <= 1 %")
        for ms in sorted(set(args.step_ms + [round(ref_ms, 3)])):
            share = cost_us / (ms * 1000) * 100
            print(f"{ms:>8.3f}ms  {cost_us:>8.2f}us  {share:>6.3f}%  {'ok' if share <= 1 else 'OVER'}")
        print()
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29581")
        dist.init_process_group("gloo", rank=0, world_size=1)
        try:
            print(f"{'fault (armed after step 10)':<30} {'acted in':>9} {'guard stopped':>14} {'latency':>8}")
            for name, command in FAULTS.items():
                acted, stopped = detection(folder, command, 10, 40)
                latency = "-" if acted is None or stopped is None else f"{stopped - acted} steps"
                print(f"{name:<30} {acted if acted is not None else '-':>9} "
                      f"{stopped if stopped is not None else 'never (40)':>14} {latency:>8}")
        finally:
            dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
