"""Built-in faults; each kind is one module. Third parties register through the ``chaos.faults`` entry-point group."""

from chaos.faults.base import Fault, FaultConfig

__all__ = ["Fault", "FaultConfig"]
