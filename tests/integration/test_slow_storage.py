"""The slow-storage fault on a real FUSE mount: a pass-through until it acts, slow while it acts, fast again once
reverted, and at the end no mount, no daemon, and every file back in the plain checkpoint directory."""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path

import psutil
import pytest

from chaos.errors import CapabilityError
from chaos.faults.slow_storage import SlowStorage, SlowStorageConfig, check_can_fuse
from chaos.runtime.context import HarnessLog, RunContext
from chaos.runtime.ledger import Ledger
from chaos.runtime.shell import Shell


def _why_not() -> str | None:
    try:
        check_can_fuse()
    except CapabilityError as exc:
        return str(exc)
    return None


pytestmark = pytest.mark.skipif(_why_not() is not None, reason=f"{_why_not()} (CI has it: .ci/run)")


def _write(path: Path, nbytes: int) -> float:
    t0 = time.monotonic()
    with open(path, "wb") as fh:
        fh.write(os.urandom(nbytes))
        fh.flush()
        os.fsync(fh.fileno())
    return time.monotonic() - t0


def _stats(run: RunContext) -> dict:
    """The daemon's count of what it delayed, once it has written its stats after the last operation (every 0.1 s)."""
    time.sleep(0.3)
    return json.loads((run.run_dir / "slowfs-stats.json").read_text())


@pytest.fixture
def run(tmp_path: Path):
    run_dir, ckpt = tmp_path / "run", tmp_path / "ckpt"
    run_dir.mkdir()
    ckpt.mkdir()
    log = HarnessLog(run_dir / "harness.jsonl")
    ctx = RunContext(experiment=None, run_dir=run_dir, ckpt_dir=ckpt, ledger=Ledger(run_dir), shell=Shell(log),  # type: ignore[arg-type]
                     log=log, rng=random.Random(0))
    ctx.ledger.open(dirs=[ckpt])
    yield ctx
    assert ctx.ledger.revert(ctx.shell) == []
    ctx.ledger.close()


def test_slow_only_while_it_acts_and_everything_back_at_the_end(run: RunContext):
    slow = SlowStorage(SlowStorageConfig(write_mbps=2.0), 0)
    slow.check(run)
    slow.prepare(run)
    ckpt = run.ckpt_dir
    assert os.path.ismount(ckpt)
    daemon = psutil.Process(run.slowfs)
    _write(ckpt / "before.bin", 1 << 20)
    # A pass-through until it acts: the daemon's own count says it delayed nothing (a time bound would depend on how
    # loaded the box is; the count does not).
    assert _stats(run)["delay_s"] == 0.0
    details = slow.inject(run)
    assert details["write_mbps"] == 2.0
    took = _write(ckpt / "during.bin", 1 << 20)
    assert took >= 0.45, took                                   # 1 MiB at 2 MB/s: 0.52 s
    (ckpt / "sub").mkdir()
    os.rename(ckpt / "during.bin", ckpt / "sub" / "moved.bin")
    assert slow.revert(run) == []
    delayed = _stats(run)["delay_s"]
    _write(ckpt / "after.bin", 1 << 20)
    after = _stats(run)
    assert after["delay_s"] == delayed and after["bytes_written"] >= 3 << 20   # reverted: nothing delayed again
    logged = [json.loads(line) for line in (run.run_dir / "harness.jsonl").read_text().splitlines()]
    stats = next(r for r in logged if r["ev"] == "slowfs")
    assert stats["delay_s"] >= 0.45 and stats["bytes_written"] >= 2 << 20
    assert run.ledger.revert(run.shell) == []                   # the run's end: unmount, stop, move back
    assert not os.path.ismount(ckpt) and not daemon.is_running()
    assert sorted(p.relative_to(ckpt).as_posix() for p in ckpt.rglob("*")) == \
        ["after.bin", "before.bin", "sub", "sub/moved.bin"]
    assert (ckpt / "sub" / "moved.bin").stat().st_size == 1 << 20
    assert not (run.run_dir / "ckpt-backing").exists()


def test_a_stall_blocks_every_operation_for_its_length(run: RunContext):
    slow = SlowStorage(SlowStorageConfig(stall_s=1.0), 0)
    slow.prepare(run)
    (run.ckpt_dir / "x").write_text("x")
    slow.inject(run)
    t0 = time.monotonic()
    assert (run.ckpt_dir / "x").read_text() == "x"             # reads wait too: the storage is gone
    assert 0.8 <= time.monotonic() - t0 < 3.0
    t0 = time.monotonic()
    (run.ckpt_dir / "x").read_text()
    assert time.monotonic() - t0 < 0.5                          # and it comes back


def test_a_non_empty_checkpoint_directory_is_refused(run: RunContext):
    (run.ckpt_dir / "old.pt").write_text("x")
    with pytest.raises(Exception, match="not empty"):
        SlowStorage(SlowStorageConfig(latency_ms=5), 0).prepare(run)


def test_the_mounts_op_log_orders_the_pointers_moves_against_the_data(run: RunContext):
    """The reference commit through the real mount (files fsynced in a temporary directory, renamed, then `latest`
    replaced by a rename), and a manager that moves `latest` first, both in a process of their own as a workload
    is: the op log has each move at its operation, nothing changed under the reference's targets after, the broken
    manager's writes after its move. A change the harness makes itself (a fault's) is marked as its own."""
    import subprocess
    import sys
    import textwrap

    from chaos.evidence.pointer import order_of
    from chaos.faults.slow_storage import oplog_path

    slow = SlowStorage(SlowStorageConfig(latency_ms=1), 0)
    slow.prepare(run)
    ckpt = run.ckpt_dir
    workload = textwrap.dedent(f"""
        import os, sys
        from pathlib import Path
        sys.path.insert(0, {str(Path(__file__).resolve().parents[2] / "workloads")!r})
        from trainkit.checkpoint import commit_dir
        ckpt = Path({str(ckpt)!r})
        for step in (10, 20):
            tmp = ckpt / f".tmp-step_{{step:06d}}"
            tmp.mkdir()
            (tmp / "state.pt").write_bytes(os.urandom(300_000))
            commit_dir(tmp, ckpt / f"step_{{step:06d}}", step)
        # The broken manager: the pointer first, the data after (never fsynced).
        (ckpt / "latest").write_text("step_000030")
        (ckpt / "step_000030").mkdir()
        (ckpt / "step_000030" / "state.pt").write_bytes(os.urandom(1000))
    """)
    subprocess.run([sys.executable, "-c", workload], check=True, timeout=60)
    with open(ckpt / "step_000030" / "state.pt", "r+b") as fh:   # the harness's own change (a fault's bit flip)
        fh.write(b"x")
    order = order_of(oplog_path(run), "latest", ckpt)
    ops = [json.loads(line) for line in oplog_path(run).read_text().splitlines()]
    assert run.ledger.revert(run.shell) == []       # the record is read while mounted; the mount goes as at a run's end
    assert "error" not in order and order["ops"] > 10, order
    moves = order["moves"]
    assert [(m["name"], m["op"]) for m in moves] == \
        [("step_000010", "rename"), ("step_000020", "rename"), ("step_000030", "write")], moves
    assert [m["changed"] for m in moves] == [0, 0, 3], moves   # mkdir, create, write under step_000030
    assert [c["op"] for c in moves[2]["changes"]] == ["mkdir", "create", "write"]
    assert moves[0]["unsynced"] == moves[1]["unsynced"] == 0    # fsynced before the manifest and the rename
    assert all(m["e"] > m["b"] for m in moves) and moves[0]["until"] == moves[1]["e"]
    assert [o.get("harness") for o in ops if o["op"] == "write" and o["path"] == "/step_000030/state.pt"] == \
        [None, True], "the workload's write is its own, the harness's is marked"
