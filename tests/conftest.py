from __future__ import annotations

import os

import pytest

from chaos.pytest_plugin import HOST_KUBERNETES

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
    # The host's local Kubernetes group runs on one worker in this order (--dist loadgroup): a module's tests
    # together, so its cluster (test_kube_existing's module fixture) comes up once, not once per test that follows
    # another module's; longest first within.
    slots = [i for i, item in enumerate(items) if _group(item) == HOST_KUBERNETES]
    kube = sorted((items[i] for i in slots), key=lambda item: str(item.path))  # stable: longest first per file
    for i, item in zip(slots, kube):
        items[i] = item


def _group(item: pytest.Item) -> str | None:
    mark = item.get_closest_marker("xdist_group")
    return str(mark.args[0]) if mark is not None and mark.args else None
