"""Synthetic dataset (each sample a pure function of seed and index) and the global-cursor sampler."""

from __future__ import annotations

from dataclasses import dataclass

import torch

_MASK64 = (1 << 64) - 1


def mix_seed(*parts: int) -> int:
    """A splitmix64 hash of integers, folded to a non-negative 63-bit torch seed."""
    x = 0x9E3779B97F4A7C15
    for part in parts:
        x = (x ^ (int(part) & _MASK64)) & _MASK64
        x = (x + 0x9E3779B97F4A7C15) & _MASK64
        z = x
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
        x = z ^ (z >> 31)
    return x & ((1 << 63) - 1)


class SyntheticDataset:
    """Classification samples: x ~ N(0, 1), y = argmax of a fixed seeded teacher applied to x."""

    def __init__(self, size: int, seed: int, in_dim: int = 16, n_classes: int = 4) -> None:
        self.size = size
        self.seed = seed
        self.in_dim = in_dim
        self.n_classes = n_classes
        gen = torch.Generator().manual_seed(mix_seed(seed, -1))
        self.teacher = torch.randn(n_classes, in_dim, generator=gen)

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        if not 0 <= index < self.size:
            raise IndexError(f"index {index} outside dataset of {self.size}")
        gen = torch.Generator().manual_seed(mix_seed(self.seed, index))
        x = torch.randn(self.in_dim, generator=gen)
        return x, int((self.teacher @ x).argmax())

    def batch(self, indices: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """Stacked inputs and labels; an empty ``indices`` gives (0, in_dim) and (0,) tensors."""
        if not indices:
            return torch.zeros(0, self.in_dim), torch.zeros(0, dtype=torch.long)
        xs, ys = zip(*(self[i] for i in indices))
        return torch.stack(xs), torch.tensor(ys, dtype=torch.long)


@dataclass
class Batch:
    epoch: int
    """Epoch the batch was drawn from."""
    indices: list[int]
    """This rank's slice (possibly empty on the short last step of an epoch)."""
    global_size: int
    """Samples in the whole global batch, over all ranks."""


class GlobalCursorSampler:
    """Epoch ``e`` visits a seeded permutation of all indices; one global cursor walks it.

    Each step consumes the next ``batch_size * world_size`` indices from the cursor and rank ``r``
    takes the contiguous slice ``[r*batch_size, (r+1)*batch_size)`` of them. No padding, no
    drop_last: the last step of an epoch is short, every index is seen exactly once per epoch.
    The cursor ``(epoch, offset)`` does not depend on the world size, so a checkpoint taken with
    one world size resumes with exactly the unconsumed indices under another.
    """

    def __init__(self, dataset_size: int, seed: int, batch_size: int) -> None:
        if dataset_size <= 0 or batch_size <= 0:
            raise ValueError("dataset_size and batch_size must be positive")
        self.dataset_size = dataset_size
        self.seed = seed
        self.batch_size = batch_size
        self.epoch = 0
        self.offset = 0
        self._perm_epoch = -1
        self._perm: list[int] = []

    def permutation(self, epoch: int) -> list[int]:
        if epoch != self._perm_epoch:
            gen = torch.Generator().manual_seed(mix_seed(self.seed, 1_000_003, epoch))
            self._perm = torch.randperm(self.dataset_size, generator=gen).tolist()
            self._perm_epoch = epoch
        return self._perm

    def next_batch(self, rank: int, world_size: int) -> Batch:
        """This rank's share of the next global batch; advances the cursor by the whole batch."""
        epoch, start = self.epoch, self.offset
        stop = min(start + self.batch_size * world_size, self.dataset_size)
        global_batch = self.permutation(epoch)[start:stop]
        mine = global_batch[rank * self.batch_size : (rank + 1) * self.batch_size]
        self.advance(stop - start)
        return Batch(epoch=epoch, indices=mine, global_size=len(global_batch))

    def advance(self, n: int) -> None:
        self.offset += n
        if self.offset >= self.dataset_size:
            self.epoch += 1
            self.offset = 0

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "offset": self.offset, "dataset_size": self.dataset_size, "seed": self.seed}

    def load_state_dict(self, state: dict[str, int]) -> None:
        if state["dataset_size"] != self.dataset_size or state["seed"] != self.seed:
            raise ValueError(
                f"checkpoint sampler is for dataset_size={state['dataset_size']} seed={state['seed']}, "
                f"this run has dataset_size={self.dataset_size} seed={self.seed}"
            )
        self.epoch = int(state["epoch"])
        self.offset = int(state["offset"])
