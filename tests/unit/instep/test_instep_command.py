"""The command folder: written whole, read back, and the applied count that outlives a rank."""

from __future__ import annotations

from pathlib import Path

from chaos.instep.command import Command, applied, count_applied, path_of, read_all, write


def test_commands_round_trip_and_a_half_written_or_foreign_file_is_skipped(tmp_path: Path) -> None:
    folder = str(tmp_path)
    write(folder, Command(index=1, kind="bitflip", where="param", ranks=[0], steps=None, params={"bit": 30}))
    write(folder, Command(index=0, kind="nan", where="loss"))
    (tmp_path / "fault-9.json").write_text('{"index": 9, "ki')  # torn: never acted on
    (tmp_path / ".fault-3.tmp").write_text("{}")
    cmds = read_all(folder)
    assert [c.index for c in cmds] == [0, 1] and cmds[1].params == {"bit": 30} and cmds[1].steps is None
    assert cmds[0].applies_to(5) and not cmds[1].applies_to(1)
    assert Path(path_of(folder, 1)).exists() and read_all(str(tmp_path / "absent")) == []


def test_the_applied_count_is_per_fault_and_rank(tmp_path: Path) -> None:
    folder = str(tmp_path)
    write(folder, Command(index=0, kind="nan", where="loss"))
    count_applied(folder, 0, 1)
    count_applied(folder, 0, 1)
    assert applied(folder, 0, 1) == 2 and applied(folder, 0, 0) == 0 and applied(folder, 4, 1) == 0
