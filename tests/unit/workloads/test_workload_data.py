"""Sampler cursor math and dataset determinism of the reference workloads."""

from __future__ import annotations

import random
from collections import Counter

import pytest
import torch
from trainkit.data import GlobalCursorSampler, SyntheticDataset, mix_seed


def consume(sampler: GlobalCursorSampler, world_size: int, steps: int) -> list[tuple[int, int, list[int]]]:
    """``(epoch, rank, indices)`` for every rank of ``steps`` steps."""
    out = []
    for _ in range(steps):
        state = sampler.state_dict()
        per_rank = []
        for rank in range(world_size):
            replica = GlobalCursorSampler(sampler.dataset_size, sampler.seed, sampler.batch_size)
            replica.load_state_dict(state)
            per_rank.append(replica.next_batch(rank, world_size))
        sampler.next_batch(0, world_size)
        out += [(b.epoch, r, b.indices) for r, b in enumerate(per_rank)]
    return out


def per_epoch(records) -> dict[int, Counter]:
    counts: dict[int, Counter] = {}
    for epoch, _rank, indices in records:
        counts.setdefault(epoch, Counter()).update(indices)
    return counts


def test_every_index_exactly_once_per_epoch_with_a_short_last_step() -> None:
    sampler = GlobalCursorSampler(250, seed=0, batch_size=4)
    records = consume(sampler, world_size=2, steps=32 * 3)  # 250/8 -> 32 steps per epoch
    counts = per_epoch(records)
    assert sorted(counts) == [0, 1, 2]
    for counter in counts.values():
        assert sorted(counter) == list(range(250)) and set(counter.values()) == {1}
    last_step_of_epoch0 = records[31 * 2 : 32 * 2]
    assert [len(r[2]) for r in last_step_of_epoch0] == [2, 0]  # rank 1 gets nothing, no padding


def test_global_batch_is_split_contiguously_by_rank() -> None:
    sampler = GlobalCursorSampler(100, seed=3, batch_size=4)
    perm = sampler.permutation(0)
    batch0 = sampler.next_batch(0, 3)
    assert batch0.indices == perm[0:4] and batch0.global_size == 12
    replica = GlobalCursorSampler(100, seed=3, batch_size=4)
    assert replica.next_batch(2, 3).indices == perm[8:12]
    assert sampler.state_dict()["offset"] == 12


def test_permutations_are_seeded_and_differ_per_epoch() -> None:
    a, b = GlobalCursorSampler(64, 5, 4), GlobalCursorSampler(64, 5, 4)
    assert a.permutation(0) == b.permutation(0) and a.permutation(1) == b.permutation(1)
    assert a.permutation(0) != a.permutation(1)
    assert a.permutation(0) != GlobalCursorSampler(64, 6, 4).permutation(0)
    assert sorted(a.permutation(7)) == list(range(64))


@pytest.mark.parametrize("seed", range(6))
def test_resume_at_any_offset_with_another_world_size_is_exactly_once(seed: int) -> None:
    rng = random.Random(seed)
    n, bs = rng.choice([37, 64, 250]), rng.choice([1, 3, 4])
    ws_before, ws_after = rng.randint(1, 4), rng.randint(1, 5)
    sampler = GlobalCursorSampler(n, seed, bs)
    before = consume(sampler, ws_before, rng.randint(0, 3 * n // (bs * ws_before)))
    resumed = GlobalCursorSampler(n, seed, bs)
    resumed.load_state_dict(sampler.state_dict())
    target_epoch = resumed.epoch + 1
    after = []
    while resumed.epoch <= target_epoch:
        after += consume(resumed, ws_after, 1)
    counts = per_epoch(before + after)
    for epoch, counter in counts.items():
        assert set(counter.values()) == {1}, f"duplicates in epoch {epoch}"
        if epoch <= target_epoch:
            assert sorted(counter) == list(range(n)), f"gaps in epoch {epoch}"


def test_cursor_refuses_a_checkpoint_of_another_dataset() -> None:
    state = GlobalCursorSampler(100, 0, 4).state_dict()
    with pytest.raises(ValueError, match="dataset_size=100"):
        GlobalCursorSampler(120, 0, 4).load_state_dict(state)


def test_samples_are_a_pure_function_of_seed_and_index() -> None:
    a, b = SyntheticDataset(50, seed=1), SyntheticDataset(50, seed=1)
    for i in (0, 17, 49):
        xa, ya = a[i]
        xb, yb = b[i]
        assert torch.equal(xa, xb) and ya == yb
    list(a[i] for i in range(50))  # reading others in between changes nothing
    assert torch.equal(a[17][0], b[17][0])
    assert not torch.equal(a[17][0], SyntheticDataset(50, seed=2)[17][0])
    with pytest.raises(IndexError):
        a[50]


def test_batches_stack_and_empty_batches_have_the_right_shape() -> None:
    ds = SyntheticDataset(10, seed=0, in_dim=8, n_classes=3)
    x, y = ds.batch([3, 1])
    assert x.shape == (2, 8) and y.dtype == torch.long and torch.equal(x[0], ds[3][0])
    x, y = ds.batch([])
    assert x.shape == (0, 8) and y.shape == (0,)
    labels = {ds[i][1] for i in range(10)}
    assert labels <= {0, 1, 2}


def test_mix_seed_is_stable_and_spreads() -> None:
    assert mix_seed(0, 1) == mix_seed(0, 1)
    assert len({mix_seed(0, i) for i in range(1000)}) == 1000
    assert all(0 <= mix_seed(s, -1) < 2**63 for s in range(10))
