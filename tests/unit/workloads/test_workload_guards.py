"""The reference workloads' guards against faults inside the step: the replica checksum and the non-finite guard."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Iterator

import pytest
import torch
import torch.distributed as dist
from trainkit.guard import NonFiniteGuard, NonFiniteStep, RollBack, SkipStep
from trainkit.replicas import ReplicaCheck, checksum


def test_one_flipped_bit_moves_the_checksum_by_exactly_that_bit() -> None:
    torch.manual_seed(0)
    params = [torch.randn(8, 8), torch.randn(8, dtype=torch.float64), torch.randn(4).to(torch.bfloat16)]
    before = checksum(params)
    for tensor, bit in ((params[0], 12), (params[1], 40), (params[2], 3)):
        word = tensor.reshape(-1)[1:2].view({torch.float32: torch.int32, torch.float64: torch.int64,
                                              torch.bfloat16: torch.int16}[tensor.dtype])
        old = int(word)
        word.bitwise_xor_(1 << bit)
        assert abs(checksum(params) - before) == abs(int(word) - old) == 1 << bit
        word.bitwise_xor_(1 << bit)
    assert checksum(params) == before


@pytest.fixture
def one_rank(tmp_path: Path) -> Iterator[None]:
    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_the_guard_stops_a_non_finite_step_and_passes_a_finite_one(one_rank: None, monkeypatch) -> None:
    from chaos import sdk

    said: list[dict] = []
    monkeypatch.setattr(sdk, "health", lambda **kw: said.append(kw))
    guard = NonFiniteGuard("restart", 0, 0, 1)
    p = torch.nn.Parameter(torch.ones(3))
    p.grad = torch.ones(3)
    guard.check(1, torch.tensor(2.0), [p])
    with pytest.raises(NonFiniteStep, match="step 2"):
        guard.check(2, torch.tensor(math.nan), [p])
    p.grad[0] = math.inf
    with pytest.raises(NonFiniteStep):
        guard.check(3, torch.tensor(1.0), [p])
    assert [s["code"] for s in said] == ["nonfinite", "nonfinite"] and said[0]["source"] == "guard"
    with pytest.raises(ValueError, match="--nonfinite must be one of off, restart, rollback, skip"):
        NonFiniteGuard("retry", 0, 0, 1)


def test_a_rollback_that_does_not_outrun_the_fault_becomes_a_restart(one_rank: None, monkeypatch) -> None:
    """Policy rollback answers a bad step by reloading in-process; a bad step at or before the one it rolled back
    from comes back before the job got past it (not transient): the guard exits for a restart instead, and says
    so in the health event's action. One past it is a new fault, rolled back again."""
    from chaos import sdk

    said: list[dict] = []
    monkeypatch.setattr(sdk, "health", lambda **kw: said.append(kw))
    guard = NonFiniteGuard("rollback", 0, 0, 1)
    p = torch.nn.Parameter(torch.ones(3))
    p.grad = torch.ones(3)
    with pytest.raises(RollBack, match="step 26"):
        guard.check(26, torch.tensor(math.nan), [p])
    guard.check(21, torch.tensor(1.0), [p])  # the replay from the checkpoint of step 20
    with pytest.raises(NonFiniteStep) as again:
        guard.check(22, torch.tensor(math.nan), [p])
    assert not isinstance(again.value, RollBack)
    with pytest.raises(RollBack):
        guard.check(27, torch.tensor(math.nan), [p])
    assert [s["action"] for s in said] == ["rollback", "restart", "rollback"]
    skip = NonFiniteGuard("skip", 0, 0, 1)
    with pytest.raises(SkipStep):
        skip.check(5, torch.tensor(math.inf), [p])
    assert said[-1]["action"] == "skip"


def test_a_single_replica_always_agrees_with_itself(one_rank: None) -> None:
    check = ReplicaCheck(5, 0, 0, 1)
    assert check.due(10) and not check.due(7)
    check.check(10, [torch.randn(4)])
    assert not ReplicaCheck(0, 0, 0, 1).due(10)


def test_the_second_strike_against_a_device_excludes_it(one_rank: None, monkeypatch, tmp_path: Path) -> None:
    """A NaN that comes back after the rollback is persistent: the guard counts strikes against the device whose
    own loss was not finite (in the checkpoint folder, across attempts) and the K-th excludes it."""
    from chaos import sdk
    from trainkit import guard as guard_module

    said: list[dict] = []
    excluded: list[dict] = []
    monkeypatch.setattr(sdk, "health", lambda **kw: said.append(kw))
    monkeypatch.setattr(guard_module, "record_exclusion", lambda path, **kw: excluded.append(kw))
    p = torch.nn.Parameter(torch.ones(3))
    p.grad = torch.ones(3)
    guard = NonFiniteGuard("restart", 0, 0, 1, exclude_after=2, strikes_dir=str(tmp_path))
    with pytest.raises(NonFiniteStep) as first:
        guard.check(26, torch.tensor(math.nan), [p])
    assert not isinstance(first.value, guard_module.ExcludeDevice) and not excluded
    # A new attempt (a fresh guard, as the restarted rank builds): the strike was kept on disk.
    again = NonFiniteGuard("restart", 0, 0, 1, exclude_after=2, strikes_dir=str(tmp_path))
    with pytest.raises(guard_module.ExcludeDevice):
        again.check(21, torch.tensor(math.nan), [p])
    assert [s["action"] for s in said] == ["restart", "exclude"] and [s["strikes"] for s in said] == [1, 2]
    assert excluded and excluded[0]["code"] == "nonfinite" and excluded[0]["rank"] == 0
    with pytest.raises(ValueError, match="checkpoint folder"):
        NonFiniteGuard("restart", 0, 0, 1, exclude_after=2)


def test_a_bad_gradient_no_loss_shows_is_not_a_strike(one_rank: None, monkeypatch, tmp_path: Path) -> None:
    """Only the rank whose own loss was not finite is where the bad value came from; a rank whose loss is fine but
    whose averaged gradient is poisoned rolls back without a strike against its device."""
    from chaos import sdk
    from trainkit import guard as guard_module

    monkeypatch.setattr(sdk, "health", lambda **kw: None)
    p = torch.nn.Parameter(torch.ones(3))
    p.grad = torch.tensor([1.0, math.nan, 1.0])
    for _ in range(3):
        guard = NonFiniteGuard("restart", 0, 0, 1, exclude_after=2, strikes_dir=str(tmp_path))
        with pytest.raises(NonFiniteStep) as caught:
            guard.check(5, torch.tensor(1.0), [p])
        assert not isinstance(caught.value, guard_module.ExcludeDevice)
