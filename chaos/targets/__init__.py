"""Built-in targets; each kind is one module. Third parties register through the ``chaos.targets`` entry-point group."""

from chaos.targets.base import Node, Target, TargetConfig

__all__ = ["Node", "Target", "TargetConfig"]
