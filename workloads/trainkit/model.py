"""The reference model: a small 3-layer MLP with dropout, initialised from the seed."""

from __future__ import annotations

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, in_dim: int, hidden: int, n_classes: int, dropout: float) -> None:
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(in_dim, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, n_classes)])
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.layers[0](x))
        x = self.dropout(x)
        x = torch.relu(self.layers[1](x))
        return self.layers[2](x)


def build_model(in_dim: int, hidden: int, n_classes: int, dropout: float, seed: int) -> MLP:
    """Same seed, same weights on every rank (init draws from a private generator state)."""
    saved = torch.random.get_rng_state()
    torch.manual_seed(seed)
    model = MLP(in_dim, hidden, n_classes, dropout)
    torch.random.set_rng_state(saved)
    return model
