"""The pointer watch: each move of ``latest`` judged at that moment, on a real directory, by a real polling thread."""

from __future__ import annotations

import os
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest

from chaos.checkpoint.manifest import build_manifest, write_atomic, write_manifest
from chaos.evidence.pointer import PointerWatch, judge_target


class Log:
    def __init__(self) -> None:
        self.records: list[tuple[str, dict[str, Any]]] = []
        self.lock = threading.Lock()

    def __call__(self, kind: str, **fields: Any) -> None:
        with self.lock:
            self.records.append((kind, fields))

    def moves(self) -> list[dict[str, Any]]:
        return [f for k, f in self.records if k == "ckpt_pointer"]


def sealed_step(root: Path, step: int, payload: bytes = b"x" * 1000) -> Path:
    d = root / f"step_{step:06d}"
    d.mkdir(parents=True)
    (d / "state.pt").write_bytes(payload)
    write_manifest(d, build_manifest(d, step))
    return d


def wait_for(pred, timeout_s: float = 5.0) -> None:
    end = time.monotonic() + timeout_s
    while not pred():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.01)


def test_a_pointer_moved_onto_a_sealed_step_is_whole_with_its_checksums_read(tmp_path: Path) -> None:
    sealed_step(tmp_path, 10)
    log = Log()
    watch = PointerWatch(tmp_path, log)
    watch.start()
    write_atomic(tmp_path / "latest", b"step_000010")
    wait_for(lambda: log.moves())
    watch.close()
    [move] = log.moves()
    assert move["whole"] is True and move["hashed"] is True and move["step"] == 10 and move["target"] == "step_000010"
    kinds = [k for k, _ in log.records]
    assert kinds[0] == "pointer_watch" and kinds[-1] == "pointer_watch"
    assert log.records[-1][1]["moves"] == 1 and log.records[-1][1]["polls"] > 1


def test_a_pointer_moved_before_its_data_is_seen_ahead_although_the_data_arrives_a_moment_later(tmp_path: Path) -> None:
    """The lie the end of a run cannot see: by the time anyone looks again, step 20 is whole."""
    sealed_step(tmp_path, 10)
    write_atomic(tmp_path / "latest", b"step_000010")
    log = Log()
    watch = PointerWatch(tmp_path, log)
    watch.start()
    wait_for(lambda: log.moves())
    write_atomic(tmp_path / "latest", b"step_000020")  # the bug: the pointer first
    wait_for(lambda: len(log.moves()) == 2)
    sealed_step(tmp_path, 20)  # the data, 'a moment later'
    watch.close()
    ahead = log.moves()[1]
    assert ahead["whole"] is False and ahead["problems"] == ["does not exist"]
    assert judge_target(tmp_path / "step_000020")["whole"] is True  # what a look at the end would have said


@pytest.mark.parametrize("damage, problem", [
    (lambda d: (d / "state.pt").write_bytes(b"x" * 10), "size 10 != manifest 1000"),
    (lambda d: (d / "state.pt").write_bytes(b"y" * 1000), "checksum"),
])
def test_a_step_directory_that_does_not_match_its_commit_record_is_not_whole(tmp_path: Path, damage, problem) -> None:
    d = sealed_step(tmp_path, 10)
    damage(d)
    got = judge_target(d)
    assert got["whole"] is False and problem in "; ".join(got["problems"])


def test_a_directory_without_a_commit_record_cannot_be_judged_at_a_moment_unless_it_is_empty(tmp_path: Path) -> None:
    d = sealed_step(tmp_path, 10)
    (d / "MANIFEST.json").unlink()
    got = judge_target(d)
    assert got["whole"] is None and "no commit record" in got["problems"][0]  # never counted as proof
    empty = tmp_path / "step_000020"
    empty.mkdir()
    assert judge_target(empty)["whole"] is False


def test_over_the_budget_only_sizes_are_judged_and_the_record_says_so(tmp_path: Path) -> None:
    got = judge_target(sealed_step(tmp_path, 10), hash_budget_bytes=100)
    assert got["whole"] is True and got["hashed"] is False


def test_a_single_file_is_judged_by_its_zip_directory(tmp_path: Path) -> None:
    good = tmp_path / "step_000010.pt"
    with zipfile.ZipFile(good, "w") as zf:
        zf.writestr("archive/data.pkl", b"p" * 500)
    assert judge_target(good)["whole"] is True
    torn = tmp_path / "step_000020.pt"
    torn.write_bytes(good.read_bytes()[:200])  # a write cut short: no central directory yet
    assert judge_target(torn)["whole"] is False
    legacy = tmp_path / "step_000030.pt"
    legacy.write_bytes(b"\x80\x02legacy pickle")
    assert judge_target(legacy)["whole"] is None  # cannot be judged at a moment: never counted as proof


def test_a_pointer_outside_the_directory_or_empty_is_not_whole(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    sealed_step(outside, 10)
    root = tmp_path / "ckpt"
    root.mkdir()
    log = Log()
    watch = PointerWatch(root, log)
    (root / "latest").write_text("../elsewhere/step_000010")
    assert watch.poll()
    assert "outside the checkpoint directory" in log.moves()[0]["problems"][0]
    (root / "latest").write_text("")
    assert watch.poll()
    assert log.moves()[1]["whole"] is False
    assert not watch.poll()  # nothing changed: no record


def test_a_symlink_pointer_is_followed(tmp_path: Path) -> None:
    sealed_step(tmp_path, 10)
    (tmp_path / "latest").symlink_to("step_000010")
    log = Log()
    assert PointerWatch(tmp_path, log).poll()
    assert log.moves()[0]["whole"] is True


def test_the_last_move_before_close_is_not_lost(tmp_path: Path) -> None:
    sealed_step(tmp_path, 10)
    log = Log()
    watch = PointerWatch(tmp_path, log, interval_s=60.0)  # the thread would not look again for a minute
    watch.start()
    write_atomic(tmp_path / "latest", b"step_000010")
    watch.close()
    assert [m["target"] for m in log.moves()] == ["step_000010"]


def test_each_move_says_how_long_after_the_previous_look_it_was_judged(tmp_path: Path) -> None:
    sealed_step(tmp_path, 10)
    log = Log()
    watch = PointerWatch(tmp_path, log)
    assert not watch.poll()
    time.sleep(0.2)  # a starved harness: the move may have happened any time in these 0.2 s
    write_atomic(tmp_path / "latest", b"step_000010")
    assert watch.poll()
    assert log.moves()[0]["lag_s"] >= 0.2


def test_a_pointer_that_is_itself_a_checkpoint_is_judged_as_one(tmp_path: Path) -> None:
    """Lightning's last.ckpt written whole (save_last=True): each replacement is a move onto itself."""
    last = tmp_path / "last.ckpt"
    with zipfile.ZipFile(last, "w") as zf:
        zf.writestr("archive/data.pkl", b"p" * 5000)
    log = Log()
    watch = PointerWatch(tmp_path, log, name="last.ckpt")
    assert watch.poll()
    assert log.moves()[0]["target"] == "last.ckpt" and log.moves()[0]["whole"] is True
    torn = tmp_path / ".last.tmp"
    torn.write_bytes(last.read_bytes()[:300])
    os.replace(torn, last)  # a copy cut short, as a move across filesystems leaves it
    assert watch.poll()
    assert log.moves()[1]["whole"] is False
