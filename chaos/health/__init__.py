"""GPU health: the XID policy, kernel-log and NVML sources, and the monitor a training process runs.

Stdlib only at import time (pynvml and torch load lazily, where they are used), so a user's
script can ``from chaos import health; health.start_monitor(...)`` at no cost.
"""

from chaos.health.monitor import HealthMonitor, start_from_env, start_monitor
from chaos.health.policy import Action, Decision, Policy, classify

__all__ = ["Action", "Decision", "HealthMonitor", "Policy", "classify", "start_from_env", "start_monitor"]
