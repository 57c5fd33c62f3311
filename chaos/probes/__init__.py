"""Capability probes for ``chaos doctor``, one module per concern (network, docker, ...), registered with ``@probe``."""
