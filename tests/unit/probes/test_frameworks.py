"""The framework probes read what is installed from package metadata and say what to install when it is not."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from chaos.probes import frameworks


@pytest.fixture
def host() -> SimpleNamespace:
    return SimpleNamespace()


def test_nothing_installed_is_said_with_the_extra_to_install(host, monkeypatch) -> None:
    monkeypatch.setattr(frameworks, "_version", lambda dist: None)
    torchft, nvrx, metrics = frameworks.torchft(host), frameworks.nvrx(host), frameworks.metrics(host)
    assert not torchft.ok and '".[torchft]"' in torchft.fix
    assert not nvrx.ok and '".[nvrx]"' in nvrx.fix
    assert not metrics.ok and "pip install" in metrics.fix


def test_torchft_without_numpy_cannot_heal(host, monkeypatch) -> None:
    monkeypatch.setattr(frameworks, "_version", lambda dist: None if dist == "numpy" else "2026.10.26")
    monkeypatch.setattr("chaos.targets.torchft.lighthouse_binary", lambda: "/venv/bin/torchft_lighthouse")
    result = frameworks.torchft(host)
    assert not result.ok and "heal" in result.detail and result.fix == "pip install numpy"


def test_what_this_environment_has_is_found(host) -> None:
    # setup.sh installs every extra: each probe finds its framework here, with the version that is installed.
    for name, dist in (("torchft", "torchft-nightly"), ("nvrx", "nvidia-resiliency-ext"), ("metrics", "prometheus-client")):
        result = getattr(frameworks, name)(host)
        version = frameworks._version(dist)
        if version is None:
            pytest.skip(f"{dist} is not installed here (bash scripts/setup.sh installs it)")
        assert result.ok and version in result.detail, (name, result)
