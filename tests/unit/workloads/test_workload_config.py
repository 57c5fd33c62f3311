"""Typed workload config: docstrings feed --help, the harness's --key value form parses."""

from __future__ import annotations

import dataclasses

import pytest
from trainkit.config import TrainConfig, build_parser, field_docs, parse_config


def test_every_field_has_help() -> None:
    docs = field_docs(TrainConfig)
    assert set(docs) == {f.name for f in dataclasses.fields(TrainConfig)}
    assert all(docs.values())
    assert "Optimizer steps" in build_parser(TrainConfig).format_help()


def test_flags_parse_in_the_harness_form(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHAOS_CKPT_DIR", raising=False)
    cfg = parse_config(TrainConfig, ["--steps", "5", "--ckpt-every", "2", "--async-save", "true", "--step-sleep", "0"])
    assert (cfg.steps, cfg.ckpt_every, cfg.async_save, cfg.step_sleep, cfg.ckpt_dir) == (5, 2, True, 0.0, "./ckpt")
    assert parse_config(TrainConfig, ["--async-save"]).async_save is True
    assert parse_config(TrainConfig, ["--async-save", "false"]).async_save is False


def test_ckpt_dir_defaults_to_the_harness_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHAOS_CKPT_DIR", "/x/ckpt")
    assert parse_config(TrainConfig, []).ckpt_dir == "/x/ckpt"
    assert parse_config(TrainConfig, ["--ckpt-dir", "/y"]).ckpt_dir == "/y"
