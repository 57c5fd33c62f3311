"""Adapters that let a training stack people actually use speak the event protocol.

Each stack is an optional extra and is imported only when its adapter is (``require`` says which
extra to install when it is missing). ``chaos.integrations.samples`` needs nothing beyond torch.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

from chaos.errors import CapabilityError

EXTRAS = {"torchdata": "stateful", "accelerate": "accelerate", "transformers": "hf", "lightning": "lightning",
          "torchft": "torchft", "nvidia_resiliency_ext": "nvrx"}
"""Module -> the extra of this package that installs it (pip install ".[stateful]")."""


def require(module: str) -> ModuleType:
    """Import ``module`` or say which extra provides it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        extra = EXTRAS.get(module.split(".")[0])
        how = f'pip install "torch-chaos[{extra}]" (or pip install -e ".[{extra}]" in a checkout)' if extra \
            else f"pip install {module.split('.')[0]}"
        raise CapabilityError(f"{module} is not installed ({exc}): {how}") from None


def dataset_size(loader: Any) -> int | None:
    """How many examples the loader's dataset holds, or None (an iterable dataset has no length)."""
    dataset = getattr(loader, "dataset", None)
    try:
        return len(dataset) if dataset is not None else None
    except TypeError:
        return None


def saved_bytes(path: str | Path) -> int:
    """The size of a saved checkpoint: a file's, or every file's under a directory (0 when it is gone)."""
    path = Path(path)
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else 0
