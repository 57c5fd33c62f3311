"""Adapters that let a training stack people actually use speak the event protocol.

Each stack is an optional extra and is imported only when its adapter is (``require`` says which
extra to install when it is missing). ``chaos.integrations.samples`` needs nothing beyond torch.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from chaos.errors import CapabilityError

EXTRAS = {"torchdata": "stateful", "accelerate": "accelerate", "transformers": "hf", "lightning": "lightning"}
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
