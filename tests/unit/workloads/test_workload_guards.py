"""The reference workloads' guards against faults inside the step: the replica checksum and the non-finite guard."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Iterator

import pytest
import torch
import torch.distributed as dist
from trainkit.guard import NonFiniteGuard, NonFiniteStep
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
    with pytest.raises(ValueError, match="--nonfinite must be one of off, restart"):
        NonFiniteGuard("skip", 0, 0, 1)


def test_a_single_replica_always_agrees_with_itself(one_rank: None) -> None:
    check = ReplicaCheck(5, 0, 0, 1)
    assert check.due(10) and not check.due(7)
    check.check(10, [torch.randn(4)])
    assert not ReplicaCheck(0, 0, 0, 1).due(10)
