"""on_file fires on what a save leaves on disk, for stacks that report nothing about their saves."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from pydantic import ValidationError

from chaos.triggers.base import TriggerState
from chaos.triggers.on_file import OnFile, OnFileParams


def at(ckpt_dir: Path | None) -> TriggerState:
    return TriggerState(now=1.0, rng=random.Random(0), ckpt_dir=ckpt_dir)


def test_it_fires_once_on_the_nth_distinct_match(tmp_path: Path) -> None:
    t = OnFile(OnFileParams(on_file="tmp-checkpoint-*", nth=2))
    assert not t(at(tmp_path))
    (tmp_path / "tmp-checkpoint-10").mkdir()
    assert not t(at(tmp_path))
    (tmp_path / "tmp-checkpoint-10").rename(tmp_path / "checkpoint-10")  # the first save done
    assert not t(at(tmp_path))  # one distinct match so far, though it is gone
    (tmp_path / "tmp-checkpoint-20").mkdir()
    assert t(at(tmp_path))
    (tmp_path / "tmp-checkpoint-30").mkdir()
    assert not t(at(tmp_path))  # once


def test_a_double_star_crosses_folders_and_no_directory_never_fires(tmp_path: Path) -> None:
    t = OnFile(OnFileParams(on_file="**/.metadata"))
    assert not t(at(None))
    (tmp_path / "step_10" / "model").mkdir(parents=True)
    assert not t(at(tmp_path))
    (tmp_path / "step_10" / "model" / ".metadata").write_text("")
    assert t(at(tmp_path))


@pytest.mark.parametrize("glob", ["/ckpt/*", "../elsewhere/*", "a/../../b", ""])
def test_a_glob_outside_the_checkpoint_directory_is_refused(glob: str) -> None:
    with pytest.raises(ValidationError):
        OnFileParams(on_file=glob)
