"""Turning an experiment's specs into the objects that act: the runner's job, not the experiment's.

An ``Experiment`` is data: validated configs and the specs of its faults, triggers and checks. The
runner builds the plugins from them here, by kind, through the registries, when a run starts.
"""

from __future__ import annotations

from typing import Any

from chaos.checks.base import Check
from chaos.spec.experiment import TRIGGER_MODIFIERS, CheckSpec, FaultSpec, TriggerSpec
from chaos.faults.base import Fault
from chaos.registry import CHECKS, FAULTS, TRIGGERS
from chaos.triggers.base import Trigger, all_of, any_of


def build_fault(spec: FaultSpec) -> Fault:
    return FAULTS.get(spec.kind)(spec.config, spec.index)


def build_check(spec: CheckSpec) -> Check:
    return CHECKS.get(spec.kind)(spec.config)


def build_trigger(spec: TriggerSpec) -> Trigger:
    return _trigger(spec.raw)


def _trigger(raw: dict[str, Any]) -> Trigger:
    (kind, value), = [(k, v) for k, v in raw.items() if k not in TRIGGER_MODIFIERS]
    if kind == "any":
        return any_of(*[_trigger(v) for v in value])
    if kind == "all":
        return all_of(*[_trigger(v) for v in value])
    cls = TRIGGERS.get(kind)
    return cls(cls.Params.model_validate(value))
