"""The reference pre-flight health gate: what a launch should check first, built from what the harness knows.

Run on every node under torchrun before an expensive job (or at each restart), with the job's own world:

    torchrun --nnodes N --nproc-per-node P ... workloads/preflight.py --ckpt-dir /ckpt --baseline base.json

Exit 0 means healthy. Each probe prints one line; the first that fails is named on the last line,
``preflight: FAIL <probe>: <why>``, which ``chaos coverage`` shows as what the gate said. In order:

- ``kernel_log`` (each node's first rank): XIDs in the kernel log (the sources of ``CHAOS_XID_SOURCE`` or
  ``--xid-source``; else /dev/kmsg where readable), classified by the health policy's table: a hardware or
  degrading XID fails, an application one is noted (it was the job's, not the node's).
- ``nvml`` (each node's first rank): uncorrected ECC errors, or a hardware slowdown, on any device NVML sees
  (the real NVML; a simulated state file where a source names one); skipped where there is no NVML.
- ``dcgm`` (each node's first rank): ``dcgmi diag -r 1`` (``--dcgm-level``) where DCGM is installed; skipped
  where it is not.
- ``storage`` (every rank): a write, fsync, read-back and digest of ``--ckpt-mb`` MiB in the checkpoint
  directory, then removed: a full, read-only or lying filesystem fails.
- ``one_step`` (all ranks): the process group forms within ``--timeout-s``, one DDP step of a small model
  runs, and every rank holds the same weights after it.
- ``storage_speed``: the slowest rank's write speed in the storage probe against ``--baseline``.
- ``allreduce``: small all-reduces (latency) and large ones (bus bandwidth) against ``--baseline``.
- ``compute``: the same matrix products timed on every rank: the slowest against the fastest (a straggler)
  and against the baseline.

``--record-baseline`` measures the last four on a healthy cluster and writes ``--baseline``: a gate that
compares against nothing cannot see a slow link. A baseline of another world size or backend is refused.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable

from chaos.health.monitor import SOURCE_ENV
from chaos.health.node_probes import Probe, dcgm_probe, kernel_log_probe, nvml_probe, storage_probe


# ---------------------------------------------------------------------------------------------- the baseline


@dataclass
class Measured:
    world_size: int
    backend: str
    latency_s: float
    """Median time of a one-element all-reduce."""
    busbw_gbps: float
    """Bus bandwidth of the large all-reduces (2(n-1)/n of the bytes per second, in GB/s)."""
    compute_s: list[float]
    """Per rank, the median time of the fixed matrix products."""
    storage_mbps: float = 0.0
    """The slowest rank's write-and-fsync speed into the checkpoint directory, MB/s (0: not measured)."""


def judge_measured(now: Measured, base: Measured | None, *, latency_factor: float, bandwidth_fraction: float,
                   straggler_ratio: float, compute_factor: float, storage_fraction: float = 0.1) -> list[Probe]:
    """The storage speed, allreduce and compute probes' verdicts: against the other ranks, and the baseline."""
    if base is not None and (base.world_size, base.backend) != (now.world_size, now.backend):
        return [Probe("allreduce", False, f"the baseline is of {base.world_size} ranks on {base.backend}, this "
                                          f"job {now.world_size} on {now.backend}: record one for this world")]
    out = []
    if base is not None and base.storage_mbps and now.storage_mbps < storage_fraction * base.storage_mbps:
        out.append(Probe("storage_speed", False, f"the checkpoint directory takes writes at {now.storage_mbps:.2f} "
                                                 f"MB/s, under {storage_fraction:g} of the baseline's "
                                                 f"{base.storage_mbps:.1f} MB/s"))
    elif base is not None and base.storage_mbps:
        out.append(Probe("storage_speed", True, f"{now.storage_mbps:.1f} MB/s written"))
    slowest = max(range(len(now.compute_s)), key=lambda r: now.compute_s[r])
    ratio = now.compute_s[slowest] / max(min(now.compute_s), 1e-9)
    if base is None:
        out.append(Probe("allreduce", True, f"latency {now.latency_s * 1e3:.2f} ms, {now.busbw_gbps:.3f} GB/s "
                                            f"(no baseline to compare)"))
    elif now.latency_s > latency_factor * base.latency_s:
        out.append(Probe("allreduce", False, f"latency {now.latency_s * 1e3:.2f} ms, over {latency_factor:g}x the "
                                             f"baseline's {base.latency_s * 1e3:.2f} ms"))
    elif now.busbw_gbps < bandwidth_fraction * base.busbw_gbps:
        out.append(Probe("allreduce", False, f"bus bandwidth {now.busbw_gbps:.3f} GB/s, under {bandwidth_fraction:g} "
                                             f"of the baseline's {base.busbw_gbps:.3f} GB/s"))
    else:
        out.append(Probe("allreduce", True, f"latency {now.latency_s * 1e3:.2f} ms, {now.busbw_gbps:.3f} GB/s"))
    if ratio > straggler_ratio:
        out.append(Probe("compute", False, f"rank {slowest} is a straggler: {now.compute_s[slowest]:.3f} s, "
                                           f"{ratio:.2f}x the fastest rank"))
    elif base is not None and now.compute_s[slowest] > compute_factor * statistics.median(base.compute_s):
        out.append(Probe("compute", False, f"rank {slowest} takes {now.compute_s[slowest]:.3f} s, over "
                                           f"{compute_factor:g}x the baseline's {statistics.median(base.compute_s):.3f} s"))
    else:
        out.append(Probe("compute", True, f"slowest rank {ratio:.2f}x the fastest"))
    return out


def read_baseline(path: str | None) -> tuple[Measured | None, str | None]:
    if not path:
        return None, None
    try:
        with open(path, encoding="utf-8") as fh:
            return Measured(**json.load(fh)), None
    except FileNotFoundError:
        return None, f"no baseline at {path}: record one on a healthy cluster with --record-baseline"
    except (OSError, ValueError, TypeError) as exc:
        return None, f"unreadable baseline {path}: {exc}"


# ---------------------------------------------------------------------------------------------- the job


def _timed(fn: Callable[[], Any], times: int) -> list[float]:
    """Seconds of each of ``times`` calls of ``fn``."""
    out = []
    for _ in range(times):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def _measure(dist: Any, torch: Any, world: int, backend: str) -> Measured:
    one = torch.zeros(1)
    for _ in range(5):
        dist.all_reduce(one)
    lat = _timed(lambda: dist.all_reduce(one), 30)
    big = torch.ones(1 << 20)  # 4 MiB
    dist.all_reduce(big)
    bw = _timed(lambda: dist.all_reduce(big), 5)
    nbytes = big.numel() * big.element_size()
    # The best of five: noise only ever slows a transfer down, a degraded link slows even the best one.
    busbw = 2 * (world - 1) / world * nbytes / min(bw) / 1e9 if world > 1 else 0.0
    a = torch.randn(160, 160)

    def products() -> None:
        x = a
        for _ in range(1200):  # about 0.2 s a repetition here: longer than a straggler's stop-and-run cycle
            x = torch.tanh(x @ x)

    reps = _timed(products, 3)
    mine = torch.tensor([statistics.median(reps)], dtype=torch.float64)
    every = [torch.zeros(1, dtype=torch.float64) for _ in range(world)]
    dist.all_gather(every, mine)
    # Every rank judges the same figures (the worst any rank saw), so all of them say the same verdict.
    worst = torch.tensor([statistics.median(lat), -(busbw if world > 1 else 0.0)], dtype=torch.float64)
    dist.all_reduce(worst, op=dist.ReduceOp.MAX)
    return Measured(world, backend, float(worst[0].item()), float(-worst[1].item()), [float(t.item()) for t in every])


def _one_step(dist: Any, torch: Any) -> Probe:
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(32, 32))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.manual_seed(1 + dist.get_rank())
    loss = model(torch.randn(8, 32)).pow(2).mean()
    loss.backward()
    opt.step()
    digest = torch.tensor([float(sum(p.double().sum().item() for p in model.parameters()))], dtype=torch.float64)
    every = [torch.zeros(1, dtype=torch.float64) for _ in range(dist.get_world_size())]
    dist.all_gather(every, digest)
    if any(abs(t.item() - every[0].item()) > 1e-9 for t in every):
        return Probe("one_step", False, f"ranks disagree on the weights after one DDP step: {[t.item() for t in every]}")
    return Probe("one_step", True, f"one DDP step on {dist.get_world_size()} ranks, weights agree")


def _watchdog(seconds: float, say: Callable[[str], None]) -> None:
    def fire() -> None:
        say(f"preflight: FAIL watchdog: not done in {seconds:g} s (a hung rank, a stuck collective)")
        os._exit(1)

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ckpt-dir", default=os.environ.get("CHAOS_CKPT_DIR", "."),
                   help="the checkpoint filesystem to test (default CHAOS_CKPT_DIR, else the working directory)")
    p.add_argument("--ckpt-mb", type=float, default=8.0, help="MiB written and read back per rank")
    p.add_argument("--baseline", help="a baseline JSON to compare the all-reduce and compute figures with")
    p.add_argument("--record-baseline", action="store_true", help="measure a healthy cluster and write --baseline")
    p.add_argument("--xid-source", action="append", default=[], help="kernel-log sources (file:PATH, kmsg, nvml:STATE)")
    p.add_argument("--timeout-s", type=float, default=30.0, help="limit for the process group and each collective")
    p.add_argument("--dcgm-level", type=int, default=1, choices=[0, 1, 2, 3],
                   help="dcgmi diag -r LEVEL where DCGM is installed (1: seconds, 2: about 2 minutes; 0: off)")
    p.add_argument("--latency-factor", type=float, default=4.0)
    p.add_argument("--bandwidth-fraction", type=float, default=0.25)
    p.add_argument("--straggler-ratio", type=float, default=1.6)
    p.add_argument("--compute-factor", type=float, default=3.0)
    p.add_argument("--storage-fraction", type=float, default=0.1,
                   help="fail when the checkpoint directory takes writes slower than this share of the baseline's")
    a = p.parse_args(argv)
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    host = os.environ.get("CHAOS_HOST") or socket.gethostname()

    def say(line: str) -> None:
        print(line, flush=True)

    _watchdog(a.timeout_s * 3, say)
    t_start = time.monotonic()
    sources = a.xid_source or [s for s in os.environ.get(SOURCE_ENV, "").split(",") if s] or ["kmsg"]
    mine: list[Probe] = []
    if local_rank == 0:
        mine += [kernel_log_probe(sources), nvml_probe(sources), dcgm_probe(a.dcgm_level, a.timeout_s * 2)]
    mine.append(storage_probe(a.ckpt_dir, a.ckpt_mb, f"{host}-{rank}"))
    for probe in mine:
        say(f"preflight rank {rank} {probe.name}: {'ok' if probe.ok else 'FAIL'}: {probe.detail}")
    failed = next((x for x in mine if not x.ok), None)
    if failed is not None:
        say(f"preflight: FAIL {failed.name} on rank {rank} ({host}): {failed.detail}")

    import datetime

    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=a.timeout_s))
    from chaos import sdk

    sdk.start(dataset_size=None, device=backend, local_rank=local_rank)  # under the harness: the group formed
    # A rank whose node is unfit still joins, so that every rank fails now, together, instead of the others
    # waiting out the process group's timeout for it.
    said: list[Any] = [None] * world
    speed = next((x.figure for x in mine if x.name == "storage" and x.figure is not None), 0.0)
    dist.all_gather_object(said, (None if failed is None else f"{failed.name} on rank {rank} ({host}): {failed.detail}",
                                  speed))
    others = [u for u, _ in said if u is not None]
    storage_mbps = min(s for _, s in said)
    if others:
        if failed is None:
            say(f"preflight: FAIL {others[0]}")
        dist.destroy_process_group()
        return 1
    stage = "one_step"
    try:
        probes = [_one_step(dist, torch)]
        stage = "allreduce"
        measured = _measure(dist, torch, world, backend)
        measured.storage_mbps = storage_mbps
        if a.record_baseline:
            if not a.baseline:
                say("preflight: FAIL baseline: --record-baseline needs --baseline PATH")
                return 2
            if rank == 0:
                tmp = f"{a.baseline}.{os.getpid()}.tmp"
                with open(tmp, "w", encoding="utf-8") as fh:
                    json.dump(asdict(measured), fh, indent=1)
                os.replace(tmp, a.baseline)
                say(f"preflight: baseline recorded in {a.baseline}: {asdict(measured)}")
            dist.barrier()
            return 0
        base, why = read_baseline(a.baseline)
        if why:
            say(f"preflight: FAIL baseline: {why}")
            return 2
        probes += judge_measured(measured, base, latency_factor=a.latency_factor,
                                 bandwidth_fraction=a.bandwidth_fraction, straggler_ratio=a.straggler_ratio,
                                 compute_factor=a.compute_factor, storage_fraction=a.storage_fraction)
        if rank == 0:
            for probe in probes:
                say(f"preflight {probe.name}: {'ok' if probe.ok else 'FAIL'}: {probe.detail}")
        failed = next((x for x in probes if not x.ok), None)
        if failed is not None:
            if rank == 0:
                say(f"preflight: FAIL {failed.name}: {failed.detail}")
            return 1
        if rank == 0:
            say(f"preflight: PASS ({world} ranks, {time.monotonic() - t_start:.2f} s)")
        return 0
    except RuntimeError as exc:  # a collective that timed out or lost a peer: the probe failed, say which
        first = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        say(f"preflight: FAIL {stage} on rank {rank} ({host}): {first[:300]}")
        return 1
    finally:
        try:
            dist.destroy_process_group()
        except Exception:  # noqa: BLE001 - a broken group at the end changes no verdict already said
            pass


def run() -> None:
    """``main``, then an exit without the interpreter's teardown: with gloo's threads and a DDP reducer still
    being freed, that teardown can abort a rank whose gate passed ("terminate called without an active
    exception", SIGABRT: seen here on a healthy run), which would be a false alarm of the gate's own making."""
    from chaos.runtime.torchrun import exit_now

    exit_now(main())


if __name__ == "__main__":
    run()
