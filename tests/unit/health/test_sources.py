"""Kernel-log sources: the file follower starts at the end, returns whole lines only, and survives rotation."""

import os
import time
from pathlib import Path

import pytest

from chaos.health.sources import FileSource, SourceUnavailable, open_source
from chaos.health.xidline import format_xid_line


def _append(path: Path, text: str) -> None:
    with open(path, "a") as fh:
        fh.write(text)


def test_starts_at_the_end_like_tail_f(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    log.write_text(format_xid_line(79, "0000:07:00") + "\n")
    src = FileSource(log, sleep=lambda s: None)
    assert src.read(0.0) == []
    _append(log, "unrelated line\n" + format_xid_line(13, "0000:0f:00") + "\n")
    found = src.read(0.0)
    assert [(s.code, s.bus_id, s.source) for s in found] == [(13, "0000:0f:00", "file")]


def test_a_half_written_line_waits_until_it_is_whole(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    log.touch()
    src = FileSource(log, sleep=lambda s: None)
    src.read(0.0)
    line = format_xid_line(48, "0000:07:00")
    _append(log, line[:20])
    assert src.read(0.0) == []
    _append(log, line[20:] + "\n")
    assert [s.code for s in src.read(0.0)] == [48]


def test_rotation_and_late_creation_are_followed_from_the_new_start(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    src = FileSource(log, sleep=lambda s: None)
    assert src.read(0.0) == []  # not there yet
    log.write_text(format_xid_line(74, "0000:07:00") + "\n")
    assert [s.code for s in src.read(0.0)] == [74]
    os.rename(log, tmp_path / "kern.log.1")
    log.write_text(format_xid_line(119, "0000:07:00") + "\n")
    assert [s.code for s in src.read(0.0)] == [119]


def test_read_waits_at_most_its_timeout(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    log.touch()
    src = FileSource(log)
    t0 = time.monotonic()
    assert src.read(0.05) == []
    assert time.monotonic() - t0 < 1.0


def test_unknown_and_incomplete_specs_say_what_is_known() -> None:
    with pytest.raises(SourceUnavailable, match="known: file:PATH"):
        open_source("syslog")
    with pytest.raises(SourceUnavailable, match="needs a path"):
        open_source("file:")
