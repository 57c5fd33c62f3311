"""The storage probes say what the storage faults need, from the faults' own capability checks."""

from __future__ import annotations

from types import SimpleNamespace

from chaos.errors import CapabilityError
from chaos.faults import ckpt_mount, slow_storage
from chaos.probes import storage


def test_a_missing_capability_is_said_with_its_fix(monkeypatch) -> None:
    def refuse(*_a: object) -> None:
        raise CapabilityError("slow-storage needs libfuse (not found): apt-get install libfuse2")

    monkeypatch.setattr(slow_storage, "check_can_fuse", refuse)
    monkeypatch.setattr(ckpt_mount, "check_can_mount", refuse)
    for result in (storage.fuse(SimpleNamespace()), storage.mounts(SimpleNamespace())):
        assert not result.ok and "apt-get install libfuse2" in result.detail


def test_a_host_that_can_says_so(monkeypatch) -> None:
    monkeypatch.setattr(slow_storage, "check_can_fuse", lambda: None)
    monkeypatch.setattr(ckpt_mount, "check_can_mount", lambda fs: None)
    assert storage.mounts(SimpleNamespace()).ok
    result = storage.fuse(SimpleNamespace())
    assert result.ok and "libfuse" in result.detail
