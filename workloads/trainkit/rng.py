"""Per-rank RNG state (torch CPU, CUDA, python, numpy): capture, restore and seeding."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch

from .data import mix_seed


def seed_rank(seed: int, rank: int) -> None:
    """Seed every RNG for ``rank`` (distinct dropout masks per rank, reproducible per seed)."""
    s = mix_seed(seed, 7_919, rank)
    torch.manual_seed(s)
    random.seed(s)
    np.random.seed(s % (1 << 32))


def capture_rng() -> dict[str, Any]:
    """All RNG states as tensors, ints and tuples (loadable with ``torch.load(weights_only=True)``)."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {
        "torch": torch.random.get_rng_state(),
        "python": random.getstate(),
        "numpy": {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                  "has_gauss": int(has_gauss), "cached": float(cached)},
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def restore_rng(state: dict[str, Any]) -> None:
    torch.random.set_rng_state(state["torch"])
    py = state["python"]
    random.setstate((py[0], tuple(py[1]), py[2]))
    npst = state["numpy"]
    np.random.set_state((npst["kind"], npst["keys"].numpy().astype(np.uint32), npst["pos"], npst["has_gauss"], npst["cached"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])
