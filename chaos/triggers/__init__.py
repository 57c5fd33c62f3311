"""Built-in triggers; each kind is one module. Third parties register through the ``chaos.triggers`` entry-point group."""

from chaos.triggers.base import Trigger, TriggerParams, TriggerState, all_of, any_of

__all__ = ["Trigger", "TriggerParams", "TriggerState", "all_of", "any_of"]
