"""The JSON Schema of experiment files, generated from the registered plugins' typed configs (``chaos schema``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import ConfigDict, Field, create_model

from chaos.registry import CHECKS, FAULTS, TARGETS
from chaos.spec.configs import FaultConfig
from chaos.spec.experiment import ExperimentFile


def json_schema() -> dict[str, Any]:
    """A JSON Schema for experiment files, generated from the registered typed configs."""
    fault_models = [
        create_model(f"Fault_{kind}", __base__=cls.Config, kind=(Literal[kind], ...),  # type: ignore[valid-type]
                     trigger=(dict[str, Any], Field(description=FaultConfig.model_fields["trigger"].description)))
        for kind, cls in FAULTS.items()
    ]
    check_models = [
        create_model(f"Check_{kind}", __config__=ConfigDict(extra="forbid"),
                     **{kind: (cls.Config, ...)})  # type: ignore[call-overload]
        for kind, cls in CHECKS.items()
    ]
    target_models = [
        create_model(f"Target_{kind}", __base__=cls.Config, kind=(Literal[kind], ...))  # type: ignore[valid-type]
        for kind, cls in TARGETS.items()
    ]
    fault_union = Union[tuple(fault_models)] if fault_models else dict  # type: ignore[valid-type]
    check_union = Union[tuple(check_models + [Literal[tuple(CHECKS.kinds())]])]  # type: ignore[valid-type]
    target_union = Union[tuple(target_models + [Literal[tuple(TARGETS.kinds())]])]  # type: ignore[valid-type]
    model = create_model(
        "Experiment", __base__=ExperimentFile,
        target=(target_union, Field(default="local", description=ExperimentFile.model_fields["target"].description)),
        faults=(list[_discriminated(fault_union)], Field(default_factory=list)),  # type: ignore[valid-type]
        checks=(list[check_union], Field(default_factory=list)),  # type: ignore[valid-type]
    )
    schema = model.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "chaos experiment"
    return schema


def _discriminated(union: Any) -> Any:
    return Annotated[union, Field(discriminator="kind")]
