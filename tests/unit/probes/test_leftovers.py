"""The leftovers probe: chaos-* namespaces sorted into live, unfinished (chaos cleanup) and orphaned."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from chaos.probes.base import Host
from chaos.runtime.ledger import LEDGER_NAME
from chaos.probes import leftovers as probe
from chaos.runtime.shell import CommandResult


class FakeShell:
    """``ip netns list`` and ``ip netns pids NAME`` answered from a table; nothing is run."""

    def __init__(self, namespaces: dict[str, list[int]]) -> None:
        self.namespaces = namespaces

    def run(self, argv, *, check: bool = True, **_kw) -> CommandResult:
        if argv[:3] == ["ip", "netns", "list"]:
            return CommandResult(list(argv), 0, "".join(f"{n} (id: {i})\n" for i, n in enumerate(self.namespaces)), "")
        if argv[:3] == ["ip", "netns", "pids"]:
            pids = self.namespaces.get(argv[3])
            if pids is None:
                return CommandResult(list(argv), 1, "", "No such file or directory")
            return CommandResult(list(argv), 0, "".join(f"{p}\n" for p in pids), "")
        raise AssertionError(f"unexpected command {argv}")


@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Unfinished runs whose ledgers name some namespaces, each with its harness alive or dead."""
    made: list[tuple[Path, bool]] = []

    def add(names: list[str], alive: bool) -> None:
        run_dir = tmp_path / f"run{len(made)}"
        run_dir.mkdir()
        (run_dir / LEDGER_NAME).write_text("".join(f'{{"undo": ["ip", "netns", "del", "{n}"]}}\n' for n in names))
        made.append((run_dir, alive))

    class FakeLedger:
        def __init__(self, run_dir: Path) -> None:
            self.alive = dict(made)[run_dir]

        def harness_alive(self) -> bool:
            return self.alive

    monkeypatch.setattr(probe, "unfinished_runs", lambda: [d for d, _ in made])
    monkeypatch.setattr(probe, "Ledger", FakeLedger)
    return add


def test_namespaces_no_ledger_names_and_nothing_runs_in_are_orphans_with_the_commands_to_remove_them(runs) -> None:
    host = Host(shell=FakeShell({"chaos-77af57-n0": [], "chaos-77af57-sw": [], "other-ns": []}))
    result = probe.leftovers(host)
    assert not result.ok
    assert "2 chaos network namespace(s) no run owns" in result.detail and "other-ns" not in result.detail
    assert result.fix == "ip netns del chaos-77af57-n0; ip netns del chaos-77af57-sw"


def test_a_dead_harness_ledger_sends_to_chaos_cleanup_and_a_live_one_is_left_alone(runs) -> None:
    runs(["chaos-aaaaaa-n0"], alive=False)
    runs(["chaos-bbbbbb-n0"], alive=True)
    host = Host(shell=FakeShell({"chaos-aaaaaa-n0": [], "chaos-bbbbbb-n0": [42]}))
    result = probe.leftovers(host)
    assert not result.ok and "chaos-aaaaaa-n0" in result.detail and "chaos-bbbbbb-n0" not in result.detail
    assert result.fix == "chaos cleanup"
    assert probe.classify_namespaces(host) == {"live": ["chaos-bbbbbb-n0"], "unfinished": ["chaos-aaaaaa-n0"],
                                               "orphan": []}


def test_a_namespace_with_a_process_in_it_is_not_called_abandoned(runs) -> None:
    # A run still setting up has not written its ledger yet, or the namespace is someone else's.
    host = Host(shell=FakeShell({"chaos-cccccc-n1": [1234], "chaos-doctor-99": []}))
    result = probe.leftovers(host)
    assert result.ok and "1 in use or just made by running jobs" in result.detail


def test_a_namespace_made_moments_ago_is_not_called_abandoned(runs, tmp_path: Path, monkeypatch) -> None:
    # Between `ip netns add` and the ledger line or the first process, a starting run looks orphaned.
    monkeypatch.setattr(probe, "NETNS_DIR", tmp_path)
    (tmp_path / "chaos-dddddd-n0").touch()
    old = tmp_path / "chaos-eeeeee-n0"
    old.touch()
    past = old.stat().st_mtime - probe.YOUNG_S - 5
    os.utime(old, (past, past))
    host = Host(shell=FakeShell({"chaos-dddddd-n0": [], "chaos-eeeeee-n0": []}))
    assert probe.classify_namespaces(host) == {"live": ["chaos-dddddd-n0"], "unfinished": [],
                                               "orphan": ["chaos-eeeeee-n0"]}


def test_a_clean_host(runs) -> None:
    assert probe.leftovers(Host(shell=FakeShell({}))).detail == "no chaos network namespaces left behind"
