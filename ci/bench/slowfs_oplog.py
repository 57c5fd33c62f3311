"""What the slow-storage mount's op log costs: the same saves through the mount with and without ``--oplog``.

The op log (chaos.runtime.slowfs.OpLog) writes one JSON line, flushed, per change the mount passes through, so
that pointer_durable can order the pointer's moves against the data (chaos/evidence/fs_ops.py). Each trial mounts
the passthrough twice over empty directories (no slowness: the mount's own cost is what is measured) and times
a checkpoint-shaped workload in each, in alternating order (ci/bench/sidebyside.py):

* a save: ``--files`` files of ``--mb`` MB written in 1-MB writes and fsynced, in a temporary directory renamed
  into place, then ``latest`` replaced by a rename (the reference commit's shape);
* small ops: ``--small`` files created, written with a few bytes, renamed and removed (the metadata a manager does).

    sudo python ci/bench/slowfs_oplog.py [--trials 5] [--files 4] [--mb 16] [--small 300]

Needs root, /dev/fuse and mfusepy (as the slow-storage fault). Prints a table of medians (min-max) and ratios.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from sidebyside import alternate, columns  # noqa: E402


def mounted(root: Path, oplog: bool) -> tuple[subprocess.Popen, Path, Path]:
    backing, mount = root / "backing", root / "mount"
    backing.mkdir()
    mount.mkdir()
    (root / "control.json").write_text("{}")
    argv = [sys.executable, "-m", "chaos.runtime.slowfs", str(backing), str(mount), "--control",
            str(root / "control.json")] + (["--oplog", str(root / "ops.jsonl"), "--harness-pid", str(os.getpid())]
                                           if oplog else [])
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 15
    while not os.path.ismount(mount):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the passthrough did not mount over {mount}")
        time.sleep(0.02)
    return proc, mount, root / "ops.jsonl"


def unmount(proc: subprocess.Popen, mount: Path) -> None:
    subprocess.run(["umount", str(mount)], check=False)
    proc.terminate()
    proc.wait(timeout=10)


def workload(mount: Path, files: int, mb: int, small: int) -> tuple[float, float]:
    block = os.urandom(1 << 20)
    t0 = time.perf_counter()
    tmp = mount / ".tmp-step"
    tmp.mkdir()
    for i in range(files):
        with open(tmp / f"shard{i}.pt", "wb") as fh:
            for _ in range(mb):
                fh.write(block)
            fh.flush()
            os.fsync(fh.fileno())
    os.rename(tmp, mount / "step_1")
    (mount / ".latest.tmp").write_text("step_1")
    os.rename(mount / ".latest.tmp", mount / "latest")
    save_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i in range(small):
        p = mount / f"f{i}"
        p.write_bytes(b"x" * 16)
        os.rename(p, mount / f"g{i}")
        os.unlink(mount / f"g{i}")
    small_s = time.perf_counter() - t0
    return save_s, small_s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--mb", type=int, default=16)
    ap.add_argument("--small", type=int, default=300)
    a = ap.parse_args()
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        print("needs root and /dev/fuse (as the slow-storage fault)", file=sys.stderr)
        return 2
    lines: dict[bool, int] = {}

    def measure(oplog: bool) -> tuple[float, float]:
        with tempfile.TemporaryDirectory(prefix="chaos-oplog-bench-") as d:
            proc, mount, ops = mounted(Path(d), oplog)
            try:
                out = workload(mount, a.files, a.mb, a.small)
            finally:
                unmount(proc, mount)
            if oplog:
                lines[oplog] = len(ops.read_text().splitlines())
        return out

    runs = alternate(a.trials, measure)
    cells = columns(runs, digits=3)
    print(f"slow-storage mount, no slowness; {a.trials} trials; a save of {a.files} x {a.mb} MB (1-MB writes, fsync, "
          f"renames), then {a.small} small files created, renamed, removed; op log lines per trial: {lines.get(True)}")
    print("| figure | with --oplog | without | ratio |\n|---|---|---|---|")
    print(f"| save s | {cells[0]} | {cells[1]} | {cells[2]} |")
    print(f"| small ops s | {cells[3]} | {cells[4]} | {cells[5]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
