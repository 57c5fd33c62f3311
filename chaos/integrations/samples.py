"""Which dataset indices each optimizer step consumed, exact under a multi-worker DataLoader.

A sampler runs ahead of the training loop (workers prefetch ``prefetch_factor`` batches each), so
recording indices where they are sampled or fetched would credit a step with samples it never
saw, and lose the prefetched ones at a kill. Here each item carries its own index from the
dataset through the workers, the collation and the queue to the loop, and the index is taken only
when the batch reaches the loop (``Tracker.track``); ``Tracker.take`` hands the indices of every
batch since the last optimizer step to ``sdk.step`` (several micro-batches under gradient
accumulation). This is the evidence ``exactly_once`` judges a stateful loader's resume with.

    from chaos.integrations import samples
    ds = samples.Indexed(dataset)
    loader = StatefulDataLoader(ds, batch_size=8, sampler=sampler, num_workers=2, collate_fn=samples.collate())
    tracker = samples.Tracker()
    for batch in tracker.track(loader):            # your batches, as your collate_fn made them
        loss = train_step(batch)
        sdk.step(step, epoch=epoch, samples=tracker.take(), loss=loss)
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, NamedTuple, Sequence


class IndexedBatch(NamedTuple):
    """A batch and the dataset indices of its items, in order."""

    indices: list[int]
    data: Any


class Indexed:
    """A map-style dataset whose items are ``(index, item)``: the index travels with the item."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> tuple[int, Any]:
        return int(index), self.dataset[index]


def collate(inner: Callable[[list[Any]], Any] | None = None) -> Callable[[Sequence[tuple[int, Any]]], IndexedBatch]:
    """A collate_fn for a loader over ``Indexed``: your ``inner`` (torch's default) on the items, the indices beside."""
    if inner is None:
        from torch.utils.data import default_collate

        inner = default_collate
    fn = inner

    def collate_indexed(batch: Sequence[tuple[int, Any]]) -> IndexedBatch:
        try:
            return IndexedBatch([i for i, _ in batch], fn([item for _, item in batch]))
        except (TypeError, ValueError) as exc:
            raise TypeError("samples.collate() expects items of samples.Indexed(dataset) "
                            f"(pairs of index and item): {exc}") from None

    return collate_indexed


class Tracker:
    """Strips the indices off the batches a loop consumes and keeps them until the optimizer step."""

    def __init__(self) -> None:
        self._pending: list[int] = []
        self.consumed = 0
        """Batches the loop has received (the count a resumed loader must continue from)."""

    def track(self, batches: Iterable[Any]) -> Iterator[Any]:
        for batch in batches:
            if not isinstance(batch, IndexedBatch):
                raise TypeError(f"Tracker.track got a {type(batch).__name__}, not an IndexedBatch: build the loader "
                                "over samples.Indexed(dataset) with collate_fn=samples.collate()")
            self._pending.extend(batch.indices)
            self.consumed += 1
            yield batch.data

    def take(self) -> list[int]:
        """The indices of every batch received since the last ``take`` (one optimizer step's samples)."""
        out, self._pending = self._pending, []
        return out

    def state_dict(self) -> dict[str, Any]:
        """Indices received but not yet stepped on (a save between micro-batches), to save with the loader's state."""
        return {"pending": list(self._pending)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._pending = [int(i) for i in state.get("pending", [])]


INDEX_KEY = "chaos_index"
"""The field ``IndexedDict`` adds to each example (the stacks' callbacks take it back off the batch)."""


class IndexedDict:
    """A map-style dataset of dict examples, each with its index added under ``chaos_index``.

    For stacks that hand the batch to code the user did not write (HF Trainer, Lightning): their
    collators batch the field like any other, through workers and prefetching, and the stack's
    ``ChaosCallback`` removes it where the batch reaches the training step."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> dict[str, Any]:
        item = self.dataset[index]
        if not isinstance(item, dict):
            raise TypeError(f"Indexed needs dict examples (the field rides along with the others), got a "
                            f"{type(item).__name__}: return a dict from the dataset, or use samples.Indexed with "
                            "samples.collate() in a loop of your own")
        return {**item, INDEX_KEY: int(index)}
