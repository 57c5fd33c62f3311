"""The collective-error hook on a real DDP model (gloo, world size 1, in process)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from chaos import sdk
from chaos.instep import comm
from chaos.instep import rank as instep_rank
from chaos.instep.command import Command, write


@pytest.fixture
def group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[instep_rank.Runtime]:
    monkeypatch.setenv(comm.COMM_ENV, "1")
    monkeypatch.setattr(sdk, "_last_step", [None])
    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1)
    (tmp_path / "instep").mkdir()
    runtime = instep_rank.Runtime(str(tmp_path / "instep"), 0)
    runtime.install()
    try:
        yield runtime
    finally:
        runtime.uninstall()
        comm.unpatch_ddp()
        dist.destroy_process_group()


def model() -> DDP:
    torch.manual_seed(0)
    return DDP(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 1)))


def test_without_a_fault_the_hook_all_reduces_as_ddp_does(group: instep_rank.Runtime) -> None:
    m = model()
    m(torch.ones(2, 4)).sum().backward()
    torch.manual_seed(0)
    plain = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 1))
    plain(torch.ones(2, 4)).sum().backward()
    assert all(torch.equal(a.grad, b.grad) for a, b in zip(m.module.parameters(), plain.parameters()))


def test_an_armed_error_makes_this_ranks_backward_fail_once(group: instep_rank.Runtime, tmp_path: Path) -> None:
    m = model()
    write(str(tmp_path / "instep"), Command(index=0, kind="collective-error", where="allreduce", ranks=[0], steps=1,
                                            params={"mode": "error"}))
    group.poll()
    with pytest.raises(Exception, match="injected failure of the gradient all-reduce"):
        m(torch.ones(2, 4)).sum().backward()
    m2 = model()  # used up: the next model (the restarted rank) trains
    m2(torch.ones(2, 4)).sum().backward()


def test_a_scripts_own_comm_hook_is_kept_and_called(group: instep_rank.Runtime) -> None:
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    calls: list[int] = []

    def mine(state: object, bucket: dist.GradBucket) -> torch.futures.Future:
        calls.append(bucket.index())
        return allreduce_hook(None, bucket)  # type: ignore[arg-type]

    m = model()
    m.register_comm_hook(None, mine)
    m(torch.ones(2, 4)).sum().backward()
    assert calls, "the script's own hook was not called"
    with pytest.raises(RuntimeError, match="only once"):
        m.register_comm_hook(None, mine)


def test_without_the_switch_ddp_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(comm.COMM_ENV, raising=False)
    assert comm.patch_ddp(object()) is False
    assert not getattr(DDP, "_chaos_patched", False)
    assert os.environ.get(comm.COMM_ENV) is None


def test_a_bucket_bitflip_corrupts_this_ranks_reduced_gradient_once(group: instep_rank.Runtime, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    said: list[dict] = []
    monkeypatch.setattr(sdk, "emit", lambda ev, **kw: said.append({"ev": ev, **kw}))
    m = model()
    write(str(tmp_path / "instep"), Command(index=0, kind="bitflip", where="bucket", ranks=[0], steps=1,
                                            params={"bit": 30, "element": 0, "tensor": 0}))
    group.poll()
    m(torch.ones(2, 4)).sum().backward()
    torch.manual_seed(0)
    plain = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 1))
    plain(torch.ones(2, 4)).sum().backward()
    differ = [not torch.equal(a.grad, b.grad) for a, b in zip(m.module.parameters(), plain.parameters())]
    assert sum(differ) == 1, "exactly one gradient tensor (the one holding the bucket's first element) changed"
    [act] = [s for s in said if s["ev"] == "instep"]
    assert act["where"] == "bucket" and act["bucket"] == 0 and act["element"] == 0 and act["before"] != act["after"]
    m.zero_grad()
    m(torch.ones(2, 4)).sum().backward()  # used up: the next step's gradients are DDP's own again
    plain.zero_grad()
    plain(torch.ones(2, 4)).sum().backward()
    assert all(torch.equal(a.grad, b.grad) for a, b in zip(m.module.parameters(), plain.parameters()))


def test_an_armed_kill_ends_the_rank_inside_its_all_reduce_after_saying_so(tmp_path: Path) -> None:
    """SIGKILL from inside the hook, in a child process: the landing is on disk first, the applied count too (the
    attempt that follows does not meet the fault again), and nothing after the backward runs."""
    import signal
    import subprocess
    import sys

    from chaos.instep.command import applied

    folder, events = tmp_path / "instep", tmp_path / "events"
    folder.mkdir()
    write(str(folder), Command(index=0, kind="collective-error", where="allreduce", ranks=[1], steps=1,
                               params={"mode": "kill"}))
    script = f"""
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from chaos.instep import rank as instep_rank
dist.init_process_group("gloo", store=dist.FileStore({str(tmp_path / 'store')!r}, 1), rank=0, world_size=1)
runtime = instep_rank.install()
assert runtime is not None and runtime.rank == 1, runtime  # RANK 0 of the world whose first rank is 1
runtime.poll()
m = DDP(torch.nn.Linear(4, 1))
m(torch.ones(2, 4)).sum().backward()
print("survived the all-reduce")
"""
    env = {**os.environ, comm.COMM_ENV: "1", "CHAOS_INSTEP_DIR": str(folder), "CHAOS_RANK_BASE": "1", "RANK": "0",
           "CHAOS_EVENTS_DIR": str(events), "OMP_NUM_THREADS": "1"}
    res = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == -signal.SIGKILL, res.stdout + res.stderr[-2000:]
    assert "survived" not in res.stdout
    assert applied(str(folder), 0, 1) == 1
    landed = [line for f in events.glob("*.jsonl") for line in f.read_text().splitlines() if '"instep"' in line]
    assert len(landed) == 1 and '"where":"allreduce"' in landed[0], landed
