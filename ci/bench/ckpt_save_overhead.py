"""Benchmark: save time of the manifest-committing checkpoint manager vs a plain ``dcp.save`` of the same state.

    python ci/bench/ckpt_save_overhead.py [--mb 256] [--repeat 5]

One process, no process group. Baseline: ``dcp.save(state, FileSystemWriter(dir, sync_files=True))``
into a fresh directory. Contender: ``trainkit.checkpoint.CheckpointManager.save`` of the same state
with the same DCP writer: temporary directory, the DCP write, fsync of every file, xxh3-128 manifest,
rename, directory fsync, atomic ``latest``. Alternating runs, medians; goal: overhead <= 5%.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "workloads"))
sys.path.insert(1, str(REPO))


class PlainDcp:
    """A CheckpointFormat that writes exactly what the baseline writes (so only the commit protocol differs)."""

    name = "bench-dcp"

    def stage(self, app: Any, step: int, *, copy: bool) -> Any:
        return app

    def write_collective(self, staged: Any, directory: Path, comm: Any) -> None:
        dcp_save(staged, directory)

    def write_local(self, staged: Any, directory: Path, rank: int) -> None:
        """Nothing per rank."""

    def load(self, directory: Path, app: Any, comm: Any) -> int:
        raise NotImplementedError("the benchmark only saves")


def dcp_save(state: Any, directory: Path) -> None:
    import torch.distributed.checkpoint as dcp

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "no process group: saving in a single process"
        dcp.save(state, storage_writer=dcp.FileSystemWriter(str(directory), sync_files=True))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=256, help="state size in MiB (a model+optimizer-like dict of tensors)")
    parser.add_argument("--repeat", type=int, default=5, help="timed saves per contender (median reported)")
    parser.add_argument("--dir", default=None, help="where to write (default: a temp dir on the same disk as /tmp)")
    args = parser.parse_args()

    import torch
    from trainkit.checkpoint import CheckpointManager
    from trainkit.dist import LocalComm

    gen = torch.Generator().manual_seed(0)
    n = args.mb * (1 << 20) // 4 // 24
    state = {"model": {f"layer{i}.weight": torch.rand(n, generator=gen) for i in range(8)},
             "optim": {f"exp_avg{i}": torch.rand(n, generator=gen) for i in range(16)}}
    nbytes = sum(t.numel() * 4 for part in state.values() for t in part.values())
    base = Path(args.dir or tempfile.mkdtemp(prefix="chaos-bench-save-"))
    # keep every save: retention (deleting the previous checkpoint) is not part of the plain baseline.
    manager = CheckpointManager(base / "managed", PlainDcp(), LocalComm(), keep=args.repeat + 2)
    try:
        plain_s: list[float] = []
        managed_s: list[float] = []
        # Nothing is deleted until the end, on either side: freeing blocks would slow the next write.
        for i in range(args.repeat + 1):  # the first round warms up and is not counted
            target = base / f"plain-{i}"
            start = time.perf_counter()
            dcp_save(state, target)
            plain = time.perf_counter() - start
            start = time.perf_counter()
            result = manager.save(i + 1, state)
            managed = time.perf_counter() - start
            if result is None or not result.ok:
                print(f"the managed save failed: {result}", file=sys.stderr)
                return 1
            if i:
                plain_s.append(plain)
                managed_s.append(managed)
        p, m = statistics.median(plain_s), statistics.median(managed_s)
        overhead = (m - p) / p * 100
        print(f"state: {nbytes / 1e6:.0f} MB in {sum(len(v) for v in state.values())} tensors, "
              f"median of {args.repeat} alternating saves, fsync on")
        print(f"{'save':40} {'median s':>9} {'MB/s':>8} {'overhead':>9}")
        print(f"{'dcp.save (plain)':40} {p:9.3f} {nbytes / p / 1e6:8.0f} {'':>9}")
        print(f"{'CheckpointManager.save (manifest commit)':40} {m:9.3f} {nbytes / m / 1e6:8.0f} {overhead:8.1f}%")
        print(f"goal overhead <= 5%: {'met' if overhead <= 5 else 'NOT met'}")
        return 0
    finally:
        if args.dir is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
