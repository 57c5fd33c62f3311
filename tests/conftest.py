from __future__ import annotations

import os

import pytest

# suite_telemetry: the project's own junit properties (host speed, workers, CPU per test), for ci/bench.
pytest_plugins = ["pytester", "suite_telemetry"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist, the slowest tests first (tests/durations.py says why); a serial run keeps the
    collection order a developer reads. Every worker computes the same order from the same file."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return
    from durations import load, longest_first

    order = longest_first([item.nodeid for item in items], load())
    items[:] = [items[i] for i in order]
