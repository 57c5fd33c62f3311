"""Fixtures for the check tests; the simulator itself lives in histsim.py."""

from __future__ import annotations

from typing import Callable

import pytest
from histsim import Sim, make_outcome

from chaos.checks.base import RunOutcome


@pytest.fixture
def sim() -> Sim:
    return Sim()


@pytest.fixture
def outcome_of() -> Callable[..., RunOutcome]:
    return make_outcome
