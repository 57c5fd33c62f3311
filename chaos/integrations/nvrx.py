"""Helpers for a loop under NVIDIA Resiliency Extension (NVRx): rank heartbeats for ``ft_launcher``'s hang detection.

NVRx's fault tolerance (https://github.com/NVIDIA/nvidia-resiliency-ext) replaces torchrun with ``ft_launcher``,
which runs a rank monitor beside every rank. The rank sends a heartbeat each step; a rank whose heartbeats stop
for longer than the launcher's ``--ft-rank-heartbeat-timeout`` (``--ft-initial-rank-heartbeat-timeout`` before the
first) is killed and the worker group restarted, without waiting for a collective to time out. The harness sees
the restart as it sees torchrun's (ft_launcher is torch elastic's agent underneath: new workers with a higher
``TORCHELASTIC_RESTART_COUNT``) and judges it with the usual checks; ``detection`` says how soon the hang was
acted on. The loop only has to beat::

    from chaos.integrations import nvrx as chaos_nvrx
    beats = chaos_nvrx.Heartbeats.start()   # after init_process_group; one heartbeat after every sdk.step
    ...train, calling sdk.step(...) each step...
    beats.stop()

``start`` reports the monitor's timeouts in a ``monitor`` event, so the journal says which bound was in force.
"""

from __future__ import annotations

from typing import Any

from chaos import sdk
from chaos.integrations import require


class Heartbeats:
    """One rank's NVRx heartbeat client: a heartbeat after each reported step."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._beat = lambda _step: self.client.send_heartbeat()

    @classmethod
    def start(cls) -> "Heartbeats":
        """Connect to this rank's monitor (ft_launcher started it) and beat after every ``sdk.step``."""
        ft = require("nvidia_resiliency_ext.fault_tolerance")
        client = ft.RankMonitorClient()
        try:
            client.init_workload_monitoring()
        except Exception as exc:  # no monitor to connect to: not started by ft_launcher
            raise RuntimeError(f"NVRx heartbeats need the rank monitor ft_launcher starts for each rank ({exc}); "
                               "launch this workload with ft_launcher (workload.launcher: ft_launcher)") from exc
        beats = cls(client)
        timeouts = client.hb_timeouts
        sdk.emit("monitor", source="nvrx", initial_s=_seconds(timeouts.initial),
                 subsequent_s=_seconds(timeouts.subsequent))
        sdk.after_step(beats._beat)
        client.send_heartbeat()  # the first: the initial timeout covered start-up, the subsequent one starts now
        return beats

    def stop(self) -> None:
        sdk.forget_after_step(self._beat)
        self.client.shutdown_workload_monitoring()


def _seconds(value: Any) -> float | None:
    return None if value is None else float(value)


class InProcess:
    """A loop under ``nvidia_resiliency_ext.inprocess.Wrapper``: each time the wrapper calls it again in the same
    process (an in-process restart), an ``inprocess_restart`` event with the wrapper's iteration and what ended the
    last one. The harness judges the restart by it (chaos.checks.restarted_in_process): same processes, no torchrun
    restart, and how long it took::

        report = chaos_nvrx.InProcess()

        @inprocess.Wrapper(...)
        def train(call_wrapper: Optional[inprocess.CallWrapper] = None):   # annotated: the wrapper passes it by type
            report.entered(call_wrapper)
            try:
                ...join a process group through a store prefixed by call_wrapper.iteration, resume, train...
            except BaseException as exc:
                report.failed(exc)
                raise
    """

    def __init__(self) -> None:
        self._cause: str | None = None

    @staticmethod
    def require() -> Any:
        return require("nvidia_resiliency_ext.inprocess")

    def entered(self, call_wrapper: Any) -> int:
        """At the top of the wrapped function; returns the wrapper's iteration (0: the first call)."""
        if call_wrapper is None:
            # The Wrapper hands its CallWrapper only to an argument annotated with that type; without it every
            # iteration looks like the first, and a restarted rendezvous reads the keys of the one that failed.
            raise TypeError("no CallWrapper reached the wrapped function: annotate its argument "
                            "`call_wrapper: Optional[inprocess.CallWrapper] = None` (inprocess.Wrapper passes it by type)")
        iteration = int(call_wrapper.iteration)
        if iteration > 0:
            sdk.emit("inprocess_restart", source="nvrx", iteration=iteration, cause=self._cause)
        self._cause = None
        return iteration

    def failed(self, exc: BaseException) -> None:
        """What ended this iteration (the next ``entered`` reports it)."""
        self._cause = f"{type(exc).__name__}: {exc}"[:300]
