"""Benchmark: ``chaos verify-checkpoint`` throughput vs ``sha256sum`` over the same ~1 GB of checkpoint files.

    python ci/bench/verify_checkpoint.py [--mb 1024] [--files 8] [--repeat 5]

Builds one manifest-committed step directory (torch.save shards of random tensors + MANIFEST.json),
warms the page cache, then times, side by side and alternating, (a) the verifier in-process,
(b) the ``chaos verify-checkpoint`` command end to end (interpreter start included), and
(c) ``sha256sum`` over the same files. Medians of ``--repeat`` runs; goal: verify >= 3x sha256sum.

The hash is xxh3-128: the threat is torn writes and bit rot, not an adversary, and xxh3 runs at
memory bandwidth (sha256 is several times slower even with SHA-NI), so verification is bound by
reading the bytes; shards are hashed on parallel threads (xxhash releases the GIL).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def build(directory: Path, total_mb: int, files: int) -> list[Path]:
    import torch

    from chaos.checkpoint.manifest import build_manifest, write_manifest

    directory.mkdir(parents=True)
    per = total_mb * (1 << 20) // files // 4
    gen = torch.Generator().manual_seed(0)
    paths = []
    for i in range(files):
        path = directory / f"__{i}_0.pt"
        torch.save({"shard": torch.rand(per, generator=gen)}, path)
        paths.append(path)
    write_manifest(directory, build_manifest(directory, 1))
    return paths


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=1024, help="total checkpoint size in MiB")
    parser.add_argument("--files", type=int, default=8, help="number of shard files")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per contender (median reported)")
    parser.add_argument("--dir", default=None, help="where to build the checkpoint (default: a temp dir)")
    args = parser.parse_args()
    if shutil.which("sha256sum") is None:
        print("sha256sum is not installed (coreutils)", file=sys.stderr)
        return 2
    from chaos.checkpoint.verify import verify

    base = Path(args.dir or tempfile.mkdtemp(prefix="chaos-bench-verify-"))
    ckpt = base / "step_000001"
    try:
        paths = build(ckpt, args.mb, args.files)
        nbytes = sum(p.stat().st_size for p in paths)
        sha = ["sha256sum", *map(str, paths)]
        cli = [sys.executable, "-m", "chaos", "verify-checkpoint", str(ckpt)]
        contenders = {
            "verify (in-process)": lambda: _ok(verify(ckpt).ok),
            "chaos verify-checkpoint (CLI)": lambda: subprocess.run(cli, check=True, capture_output=True),
            "sha256sum": lambda: subprocess.run(sha, check=True, capture_output=True),
        }
        for fn in contenders.values():  # warm the page cache and the imports
            fn()
        times: dict[str, list[float]] = {name: [] for name in contenders}
        for _ in range(args.repeat):
            for name, fn in contenders.items():
                times[name].append(timed(fn))
        medians = {name: statistics.median(ts) for name, ts in times.items()}
        base_s = medians["sha256sum"]
        print(f"checkpoint: {nbytes / 1e9:.2f} GB in {len(paths)} files, page cache warm, "
              f"median of {args.repeat}")
        print(f"{'contender':32} {'median s':>9} {'GB/s':>7} {'vs sha256sum':>13}")
        for name, m in medians.items():
            print(f"{name:32} {m:9.3f} {nbytes / m / 1e9:7.2f} {base_s / m:12.2f}x")
        goal = base_s / medians["chaos verify-checkpoint (CLI)"] >= 3.0
        print(f"goal >= 3x sha256sum (CLI, end to end): {'met' if goal else 'NOT met'}")
        return 0
    finally:
        if args.dir is None:
            shutil.rmtree(base, ignore_errors=True)


def _ok(value: bool) -> None:
    if not value:
        raise RuntimeError("the benchmark checkpoint does not verify")


if __name__ == "__main__":
    sys.exit(main())
