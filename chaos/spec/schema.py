"""The experiment file's schema as one typed model, generated from the registered plugins' typed configs.

There is one encoding of what a valid file looks like: the models themselves (``ExperimentFile``, the
trigger modifiers, each fault's, check's, target's and trigger's config). The loader (chaos.spec.load)
dispatches each section to its kind's model to report every problem at its line; ``experiment_model``
assembles the same models into one type, and ``chaos schema`` prints that type's JSON Schema for
editors and CI linters. tests/unit/spec/test_schema.py holds the two to the same answers.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.fields import FieldInfo

from chaos.registry import CHECKS, FAULTS, TARGETS, TRIGGERS
from chaos.spec.configs import FaultConfig
from chaos.spec.experiment import COMBINATORS, ExperimentFile, TriggerModifiers

def _required(field: FieldInfo) -> Any:
    """A field's type with its constraints, for use as a required field of another model."""
    return Annotated[(field.annotation, *field.metadata)] if field.metadata else field.annotation


def trigger_type() -> Any:
    """Every form a trigger takes: ``{kind: {fields}}``, ``{kind: value}`` (the kind's shorthand field),
    the flat ``{kind: value, other fields}``, and ``{any: [...]}`` / ``{all: [...]}``; each with the modifiers."""
    forms: list[type[BaseModel]] = []
    for kind, cls in TRIGGERS.items():
        params = cls.Params
        short = params.model_fields.get(cls.shorthand) if cls.shorthand else None
        value = params if short is None else Union[params, _required(short)]
        forms.append(create_model(f"Trigger_{kind}", __base__=TriggerModifiers, __doc__=cls.__doc__,
                                  **{kind: (value, ...)}))  # type: ignore[call-overload]
        others = {n: (f.annotation, f) for n, f in params.model_fields.items() if n != cls.shorthand}
        if short is not None and others:
            forms.append(create_model(f"Trigger_{kind}_flat", __base__=TriggerModifiers,
                                      __doc__=f"{kind}: its shorthand value, its other fields beside it",
                                      **{kind: (_required(short), ...)}, **others))  # type: ignore[call-overload]
    combinators = [create_model(f"Trigger_{name}", __base__=TriggerModifiers,
                                **{name: (list["Trigger"], Field(min_length=1))})  # type: ignore[call-overload]
                   for name in COMBINATORS]
    union = Union[tuple(forms + combinators)]  # type: ignore[valid-type]
    for model in combinators:
        model.model_rebuild(_types_namespace={"Trigger": union})
    return union


def experiment_model() -> type[ExperimentFile]:
    """The whole experiment file as one model: ``ExperimentFile`` with each section typed by its kinds' configs."""
    trigger = trigger_type()
    fault_models = [
        create_model(f"Fault_{kind}", __base__=cls.Config, kind=(Literal[kind], ...),  # type: ignore[valid-type]
                     trigger=(trigger, Field(description=FaultConfig.model_fields["trigger"].description)))
        for kind, cls in FAULTS.items()
    ]
    check_models = [
        create_model(f"Check_{kind}", __config__=ConfigDict(extra="forbid"),
                     **{kind: (Optional[cls.Config], ...)})  # type: ignore[call-overload]
        for kind, cls in CHECKS.items()
    ]
    target_models = [
        create_model(f"Target_{kind}", __base__=cls.Config, kind=(Literal[kind], ...))  # type: ignore[valid-type]
        for kind, cls in TARGETS.items()
    ]
    fault_union = Annotated[Union[tuple(fault_models)], Field(discriminator="kind")]  # type: ignore[valid-type]
    check_union = Union[tuple(check_models + [Literal[tuple(CHECKS.kinds())]])]  # type: ignore[valid-type]
    target_union = Union[tuple(target_models + [Literal[tuple(TARGETS.kinds())]])]  # type: ignore[valid-type]
    return create_model(
        "Experiment", __base__=ExperimentFile,
        target=(target_union, Field(default="local", description=ExperimentFile.model_fields["target"].description)),
        faults=(list[fault_union], Field(default_factory=list, max_length=1000,  # type: ignore[valid-type]
                                         description=ExperimentFile.model_fields["faults"].description)),
        checks=(list[check_union], Field(default_factory=list, max_length=100,  # type: ignore[valid-type]
                                         description=ExperimentFile.model_fields["checks"].description)),
    )


def json_schema() -> dict[str, Any]:
    """A JSON Schema for experiment files (``chaos schema``), generated from ``experiment_model``."""
    schema = experiment_model().model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "chaos experiment"
    return schema
