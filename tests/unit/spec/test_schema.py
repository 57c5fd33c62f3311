"""One encoding of the experiment file: the loader and the generated schema model give the same answers.

The loader dispatches each section to its kind's config model (for errors at their line); the schema
model (``chaos schema``) assembles the same models into one type. Any file one accepts the other must
accept, and any file one refuses the other must refuse, or an editor's schema and the harness disagree.
"""

from __future__ import annotations

import pytest
import yaml
from pydantic import ValidationError

from chaos.errors import ExperimentError
from chaos.spec.load import load_experiment
from chaos.spec.schema import experiment_model, json_schema

from tests.unit.spec.test_experiment import GOOD, ROOT, write

MODEL = experiment_model()

# Each edit replaces the first string of GOOD with the second: forms the loader accepts.
ACCEPTED = {
    "shorthand trigger": ("{at_step: 25}", "{at_step: 25}"),
    "nested trigger": ("{at_step: 25}", "{at_step: {at_step: 25}}"),
    "flat trigger with a modifier": ("{at_step: 25}", "{on_event: ckpt_commit, nth: 2, delay_s: 1}"),
    "nested fields": ("{at_step: 25}", "{on_event: {on_event: ckpt_commit, nth: 2}}"),
    "any of two with times": ("{at_step: 25}", "{any: [{at_step: 25}, {after_s: 60}], delay_s: 0.5}"),
    "all, nested": ("{at_step: 25}", "{all: [{any: [{at_step: 5}, {after_s: 1}]}, {every_steps: 10}], times: 3}"),
    "poisson shorthand": ("{at_step: 25}", "{poisson: 30, times: 2}"),
    "in_training flat": ("{at_step: 25}", "{in_training: 5, gap_s: 2}"),
    "a bare check": ("  - completes: {max_restarts: 1}", "  - exactly_once"),
    "a check with null fields": ("  - completes: {max_restarts: 1}", "  - completes:"),
    "target by name": ("checks:", "target: local\nchecks:"),
    "target mapping": ("checks:", "target: {kind: local}\nchecks:"),
}

# Forms the loader refuses: the schema model must refuse them too.
REFUSED = {
    "negative delay": ("{at_step: 25}", "{at_step: 25, delay_s: -1}"),
    "delay as text": ("{at_step: 25}", "{at_step: 25, delay_s: '5'}"),
    "delay as a boolean": ("{at_step: 25}", "{at_step: 25, delay_s: true}"),
    "zero times": ("{at_step: 25}", "{every_steps: 5, times: 0}"),
    "fractional times": ("{at_step: 25}", "{every_steps: 5, times: 1.5}"),
    "negative step": ("{at_step: 25}", "{at_step: -3}"),
    "unknown trigger": ("{at_step: 25}", "{at_stp: 25}"),
    "unknown trigger field": ("{at_step: 25}", "{on_event: ckpt_commit, nht: 2}"),
    "two trigger kinds": ("{at_step: 25}", "{at_step: 25, after_s: 3}"),
    "empty any": ("{at_step: 25}", "{any: []}"),
    "empty trigger": ("{at_step: 25}", "{}"),
    "modifier only": ("{at_step: 25}", "{delay_s: 2}"),
    "missing trigger": ("    trigger: {at_step: 25}\n", ""),
    "unknown fault field": ("    rank: 1", "    rnak: 1"),
    "unknown fault kind": ("kind: kill-rank", "kind: kill-rnak"),
    "unknown check": ("  - completes: {max_restarts: 1}", "  - completess: {}"),
    "unknown check field": ("{max_restarts: 1}", "{max_restart: 1}"),
    "two checks in one item": ("  - completes: {max_restarts: 1}", "  - {completes: {}, exactly_once: {}}"),
    "unknown target": ("checks:", "target: {kind: cloud}\nchecks:"),
    "unknown top-level field": ("checks:", "chekcs: []\nchecks:"),
    "bad timeout": ("checks:", "timeout_s: 0\nchecks:"),
}


def _edited(edit: tuple[str, str]) -> str:
    old, new = edit
    assert old in GOOD, old
    return GOOD.replace(old, new, 1)


def _model_accepts(text: str) -> bool:
    try:
        MODEL.model_validate(yaml.safe_load(text))
    except ValidationError:
        return False
    return True


def _loader_accepts(tmp_path, text: str) -> bool:
    try:
        load_experiment(write(tmp_path, text))
    except ExperimentError:
        return False
    return True


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_what_the_loader_accepts_the_schema_accepts(tmp_path, name: str) -> None:
    text = _edited(ACCEPTED[name])
    assert _loader_accepts(tmp_path, text) and _model_accepts(text)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_what_the_loader_refuses_the_schema_refuses(tmp_path, name: str) -> None:
    text = _edited(REFUSED[name])
    assert not _loader_accepts(tmp_path, text), "the loader accepted it"
    assert not _model_accepts(text), "the schema accepted what the loader refuses"


def test_every_shipped_experiment_fits_the_schema() -> None:
    files = sorted((ROOT / "experiments").glob("*.yaml"))
    assert files
    for path in files:
        assert MODEL.model_validate(yaml.safe_load(path.read_text())), path


def test_the_schema_describes_triggers_and_their_limits() -> None:
    schema = json_schema()
    trigger = schema["$defs"]["Trigger_at_step"]
    assert set(trigger["properties"]) == {"at_step", "delay_s", "times"} and trigger["required"] == ["at_step"]
    assert schema["$defs"]["Trigger_any"]["properties"]["any"]["minItems"] == 1
    assert trigger["properties"]["delay_s"]["maximum"] == 86400 and trigger["properties"]["times"]
