"""A memory cgroup of the run's own: a real kernel OOM kill under its limit, counted by the cgroup itself."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from chaos.runtime import memcg
from chaos.runtime.shell import Shell
from chaos.runtime.undo import RemoveCgroup, Scope

WHY = memcg.refusal()


def test_a_non_root_user_is_told_what_is_needed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert "needs root" in (memcg.refusal() or "")


def test_the_undo_refuses_anything_but_a_chaos_cgroup() -> None:
    scope = Scope((Path("/tmp"),))
    assert RemoveCgroup("/sys/fs/cgroup/memory/user.slice").refusal(scope)
    assert RemoveCgroup("/etc/chaos-x").refusal(scope)
    assert RemoveCgroup("/sys/fs/cgroup/memory/a/../chaos-x").refusal(scope)
    assert RemoveCgroup("/sys/fs/cgroup/memory/a/chaos-x").refusal(scope) is None


@pytest.mark.skipif(WHY is not None, reason=f"{WHY} (CI runs the suite as root, where it runs)")
def test_a_process_over_its_limit_is_killed_by_the_kernel_and_counted(tmp_path: Path) -> None:
    own = memcg.own_memory_cgroup()
    assert own is not None
    cg = memcg.MemCgroup(own.path / f"chaos-test-{os.getpid()}", own.version)
    undo = RemoveCgroup(str(cg.path))
    cg.path.mkdir()
    try:
        cg.set_limit(64 * 2**20)
        child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.readline(); "
                                  "b = bytearray(512 * 2**20); print('survived')"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        cg.add(child.pid)
        out, _ = child.communicate("go\n", timeout=60)
        assert child.returncode == -9 and "survived" not in out
        assert cg.oom_kills() == 1
    finally:
        undo.run(Shell())
    assert not cg.path.exists() and undo.leftover(Shell()) is None
