"""Indices are taken where a batch reaches the loop: exact with worker processes, prefetching and accumulation."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from chaos.integrations import samples


def _data(n: int = 40) -> TensorDataset:
    return TensorDataset(torch.arange(n, dtype=torch.float32).unsqueeze(1))


@pytest.mark.parametrize("workers", [0, 2])
def test_each_batch_brings_its_own_indices_through_workers_and_prefetch(workers: int) -> None:
    ds = samples.Indexed(_data())
    order = torch.randperm(40, generator=torch.Generator().manual_seed(3)).tolist()
    loader = DataLoader(ds, batch_size=4, sampler=order, num_workers=workers, prefetch_factor=4 if workers else None,
                        collate_fn=samples.collate())
    tracker = samples.Tracker()
    seen: list[int] = []
    for (x,) in tracker.track(loader):
        got = tracker.take()
        assert got == [int(v) for v in x.squeeze(1).tolist()]  # the item's value is its index here
        seen += got
    assert seen == order and tracker.consumed == 10


def test_a_step_over_several_micro_batches_takes_them_all() -> None:
    loader = DataLoader(samples.Indexed(_data(12)), batch_size=2, collate_fn=samples.collate())
    tracker = samples.Tracker()
    steps = []
    for n, _batch in enumerate(tracker.track(loader), start=1):
        if n % 3 == 0:  # gradient accumulation over 3 micro-batches
            steps.append(tracker.take())
    assert steps == [[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11]]


def test_pending_indices_survive_a_save_between_micro_batches() -> None:
    tracker = samples.Tracker()
    list(tracker.track([samples.IndexedBatch([5, 6], None)]))
    restored = samples.Tracker()
    restored.load_state_dict(tracker.state_dict())
    assert restored.take() == [5, 6]


def test_a_loader_not_built_over_indexed_is_a_clear_error() -> None:
    loader = DataLoader(_data(4), batch_size=2)
    with pytest.raises(TypeError, match=r"samples\.Indexed\(dataset\)"):
        list(samples.Tracker().track(loader))


def test_a_missing_stack_names_the_extra_to_install(monkeypatch) -> None:
    import sys

    from chaos.errors import CapabilityError
    from chaos.integrations import require

    for mod in [m for m in sys.modules if m.startswith("torchdata")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, "torchdata", None)  # an import of it now fails as if not installed
    with pytest.raises(CapabilityError, match=r"\[stateful\]"):
        require("torchdata.stateful_dataloader")
