"""A run's figures as Prometheus metrics: for the dashboards operators already watch.

One ``RunMetrics`` holds a registry (prometheus-client) that a run fills twice: live, from each poll of the
runner (the step reached, restarts, faults injected and reverted, goodput so far), and whole, from the
finished run's journal (each fault's recovery figures, each check's verdict, goodput and badput by cause, the
run's verdict). It is written as a node-exporter textfile, pushed to a Pushgateway, or served on a port
while runs and game days go on (``chaos run/gameday --metrics-textfile/--metrics-pushgateway/--metrics-port``).

Names follow Prometheus' conventions: the unit in the name (``_seconds``, ``_ratio``), ``_total`` for
counters, and what varies in labels: ``experiment`` and ``run`` (the run folder's name) on every series,
then ``fault`` (its label, ``kill-rank#0``) and ``kind``, ``check``, ``verdict``, ``cause``, ``phase``. A
verdict is a state set: one series per possible verdict, 1 for the one that holds. Badput causes that mean
what a cause of Google's ml-goodput-measurement means carry its name (``program_startup``,
``unproductive_checkpoint_save_time``, ``unproductive_checkpoint_restore_time``,
``wasted_progress_from_disruption``); the others keep the harness's (chaos.evidence.goodput.CAUSES).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, push_to_gateway, start_http_server, write_to_textfile

from chaos.errors import UsageError
from chaos.evidence.goodput import CAUSES

if TYPE_CHECKING:
    from chaos.report.journal import Journal

RUN_VERDICTS = ("RUNNING", "PASS", "FAIL", "INCONCLUSIVE", "INVALID", "ERROR")
CHECK_VERDICTS = ("pass", "fail", "inconclusive", "error", "skipped")
PHASES = ("detect", "restart", "resume", "regain")
"""Recovery figures of a fault (chaos.evidence.recovery), each ``<phase>_s`` in the journal."""
BADPUT_NAMES = {"startup": "program_startup", "ckpt_save": "unproductive_checkpoint_save_time",
                "ckpt_load": "unproductive_checkpoint_restore_time",
                "recompute": "wasted_progress_from_disruption"}
"""The harness's badput causes that mean what ml-goodput-measurement's BadputType of that name means."""
RUN = ("experiment", "run")


def badput_cause(cause: str) -> str:
    return BADPUT_NAMES.get(cause, cause)


class RunMetrics:
    """The metrics of the runs of one ``chaos`` command, in one registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.verdict = Gauge("chaos_run_verdict", "The run's verdict (1 for the one that holds; RUNNING while it runs)",
                             [*RUN, "verdict"], registry=r)
        self.started = Gauge("chaos_run_start_time_seconds", "When the run started (Unix time)", RUN, registry=r)
        self.wall = Gauge("chaos_run_duration_seconds", "The run's wall time, so far while it runs", RUN, registry=r)
        self.exit_code = Gauge("chaos_run_exit_code", "The harness's exit code for the run (0 pass, 1 check failed, "
                               "2 invalid, 3 harness error)", RUN, registry=r)
        self.step = Gauge("chaos_training_step", "The highest training step any rank reported", RUN, registry=r)
        self.restarts = Gauge("chaos_run_restarts", "Attempts of the job after its first (restarts and relaunches)",
                              RUN, registry=r)
        self.injected = Counter("chaos_faults_injected", "Faults injected", [*RUN, "kind"], registry=r)
        self.reverted = Counter("chaos_faults_reverted", "Faults reverted (their effect undone by the harness)",
                                [*RUN, "kind"], registry=r)
        self.failed = Counter("chaos_faults_failed", "Faults whose injection failed", [*RUN, "kind"], registry=r)
        self.recovery = Gauge("chaos_fault_recovery_seconds", "Seconds from a fault to each phase of the job's "
                              "recovery: detect, restart (processes up), resume (a step again), regain (the step "
                              "rate back)", [*RUN, "fault", "kind", "phase"], registry=r)
        self.lost_steps = Gauge("chaos_fault_lost_steps", "Durable steps a fault cost: how far the resume fell short "
                                "of the newest checkpoint that was durable when it acted (0: it resumed from it)",
                                [*RUN, "fault", "kind"], registry=r)
        self.check = Gauge("chaos_check_verdict", "Each check's verdict (1 for the one that holds)",
                           [*RUN, "check", "verdict"], registry=r)
        self.goodput = Gauge("chaos_goodput_ratio", "Productive training time over wall time (so far while it runs)",
                             RUN, registry=r)
        self.productive = Gauge("chaos_productive_seconds", "Seconds of productive training", RUN, registry=r)
        self.badput = Gauge("chaos_badput_seconds", "Seconds lost, by cause", [*RUN, "cause"], registry=r)
        self._counted: dict[tuple[str, str], set[tuple[str, str]]] = {}
        """Per run, the (fault label, event) pairs already counted: a poll sees every fault again."""

    # ---- filling it -------------------------------------------------------------------------

    def _set_verdict(self, run: tuple[str, str], word: str) -> None:
        for state in RUN_VERDICTS:
            self.verdict.labels(*run, state).set(1.0 if state == word else 0.0)

    def _count_faults(self, run: tuple[str, str], faults: list[Any]) -> None:
        counted = self._counted.setdefault(run, set())
        for f in faults:
            events = [("injected", self.injected)] if f.injected else []
            if f.error:
                events.append(("failed", self.failed))
            if f.injected and f.t_revert is not None:
                events.append(("reverted", self.reverted))
            for name, counter in events:
                if (f.label, name) not in counted:
                    counted.add((f.label, name))
                    counter.labels(*run, f.kind).inc()

    def _set_split(self, run: tuple[str, str], goodput: float | None, seconds: dict[str, float]) -> None:
        if goodput is not None:
            self.goodput.labels(*run).set(goodput)
        for cause in CAUSES:
            value = seconds.get(cause)
            if value is None:
                continue
            if cause == "productive":
                self.productive.labels(*run).set(value)
            else:
                self.badput.labels(*run, badput_cause(cause)).set(value)

    def live(self, experiment: str, run_name: str, started: float, state: Any,
             split: Any | None = None) -> None:
        """One poll of a run in progress: ``state`` is the runner's chaos.run.progress.LiveState (not imported here:
        the run imports the report, not the other way round), ``split`` its goodput so far."""
        run = (experiment, run_name)
        self._set_verdict(run, "RUNNING")
        self.started.labels(*run).set(started)
        self.wall.labels(*run).set(state.now)
        self.step.labels(*run).set(state.max_step)
        attempts = {str(r.get("attempt")) for r in state.history.of("start") if r.get("attempt") is not None}
        self.restarts.labels(*run).set(max(0, len(attempts) - 1))
        self._count_faults(run, state.faults)
        if split is not None:
            self._set_split(run, split.goodput, split.seconds)

    def finished(self, journal: "Journal") -> None:
        """Everything a finished run's journal says."""
        run = (journal.experiment, journal.folder.name)
        self._set_verdict(run, journal.word)
        self.started.labels(*run).set(journal.started)
        self.wall.labels(*run).set(journal.wall_s)
        if journal.exit_code is not None:
            self.exit_code.labels(*run).set(journal.exit_code)
        if journal.max_step is not None:
            self.step.labels(*run).set(journal.max_step)
        self.restarts.labels(*run).set(max(0, len(journal.attempts) - 1))
        self._count_faults(run, journal.faults)
        for f in journal.faults:
            rec = f.recovery or {}
            for phase in PHASES:
                value = rec.get(f"{phase}_s")
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    self.recovery.labels(*run, f.label, f.kind, phase).set(value)
            if isinstance(rec.get("lost_steps"), int) and not isinstance(rec.get("lost_steps"), bool):
                self.lost_steps.labels(*run, f.label, f.kind).set(rec["lost_steps"])
        for c in journal.checks:
            for state in CHECK_VERDICTS:
                self.check.labels(*run, c.kind, state).set(1.0 if c.verdict == state else 0.0)
        if journal.goodput:
            self._set_split(run, journal.goodput.get("goodput"), journal.goodput.get("seconds") or {})

    # ---- getting it out ----------------------------------------------------------------------

    def write_textfile(self, path: str | Path) -> Path:
        return write_textfile(path, self.registry)

    def push(self, gateway: str, experiment: str, run_name: str, job: str = "chaos") -> None:
        """Push every series to a Pushgateway, grouped by job, experiment and run: a later run does not replace an
        earlier one's figures, and a repeated push of the same run does."""
        push(gateway, self.registry, job, {"experiment": experiment, "run": run_name})

    def serve(self, port: int, addr: str = "127.0.0.1") -> Any:
        """Serve /metrics on ``addr:port`` until the command ends (a daemon thread); the server, to shut it down."""
        try:
            server, _thread = start_http_server(port, addr=addr, registry=self.registry)
        except OSError as exc:
            raise UsageError(f"--metrics-port {port}: cannot listen on {addr}:{port} ({exc.strerror or exc}); pick a "
                             f"free port") from None
        return server


def write_textfile(path: str | Path, registry: CollectorRegistry) -> Path:
    """``registry`` in the node-exporter textfile collector's format, written whole (prometheus-client writes a
    temporary file beside it and renames it: the collector never reads half a file)."""
    path = Path(path)
    check_textfile(str(path))  # the folder may have gone since the command started
    try:
        write_to_textfile(str(path), registry)
    except OSError as exc:
        raise UsageError(f"--metrics-textfile {path}: cannot write it ({exc.strerror or exc}); pick a writable "
                         f"folder") from None
    return path


def push(gateway: str, registry: CollectorRegistry, job: str, grouping_key: dict[str, str]) -> None:
    """Every series of ``registry`` to a Pushgateway, replacing what this job and grouping key pushed before."""
    try:
        push_to_gateway(gateway, job=job, registry=registry, grouping_key=grouping_key, timeout=10)
    except OSError as exc:
        raise UsageError(f"--metrics-pushgateway {gateway}: the push failed ({exc}); is a Pushgateway listening "
                         f"there (default port 9091)?") from None


def check_textfile(path: str | None) -> None:
    """Refuse a textfile path before any run, not after an hour of it."""
    if path is None:
        return
    p = Path(path)
    if p.suffix != ".prom":
        raise UsageError(f"--metrics-textfile {p}: the node exporter reads only files ending in .prom")
    if not p.parent.is_dir() or not os.access(p.parent, os.W_OK):
        raise UsageError(f"--metrics-textfile {p}: its folder {p.parent} does not exist or is not writable; point it "
                         f"at the node exporter's --collector.textfile.directory")


LIVE_EVERY_S = 1.0
"""How often a poll updates the live series (the runner polls several times a second)."""
SPLIT_EVERY_S = 5.0
"""How often the goodput so far is computed again while a run goes (it folds the whole history)."""


class Outputs:
    """Where a command's metrics go (``--metrics-textfile``, ``--metrics-pushgateway``, ``--metrics-port``), and the
    hooks that feed them: ``poller`` for the runner's polls, ``finished`` after each run."""

    def __init__(self, textfile: str | None = None, pushgateway: str | None = None, port: int | None = None) -> None:
        check_textfile(textfile)
        if port is not None and not 0 < port < 65536:
            raise UsageError(f"--metrics-port {port}: not a TCP port (1-65535)")
        self.textfile, self.pushgateway, self.port = textfile, pushgateway, port
        self.metrics = RunMetrics()
        self._server: Any = None

    @property
    def enabled(self) -> bool:
        return bool(self.textfile or self.pushgateway or self.port)

    def start(self) -> None:
        """Listen on the port, and make sure the Pushgateway answers: a typo fails before the runs, not after."""
        if self.pushgateway:
            import urllib.request

            url = self.pushgateway if "://" in self.pushgateway else f"http://{self.pushgateway}"
            try:
                urllib.request.urlopen(f"{url.rstrip('/')}/-/ready", timeout=5).close()
            except OSError as exc:
                raise UsageError(f"--metrics-pushgateway {self.pushgateway}: no Pushgateway answers there ({exc}); "
                                 f"start one (prometheus-pushgateway, port 9091) or fix the address") from None
        if self.port:
            self._server = self.metrics.serve(self.port)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server = None

    def poller(self, experiment: str, then: Any = None) -> Any:
        """An ``on_poll`` for the runner (chaos.run.session.run_experiment) that keeps the live series current and
        calls ``then`` (another on_poll: the game day's screen) too; ``then`` alone when only the finished run's
        figures are wanted (a textfile or a push at the end)."""
        if not self.port:
            return then
        import time

        from chaos.evidence.goodput import compute_goodput

        last = {"poll": float("-inf"), "split": float("-inf")}
        split: list[Any] = [None]

        def on_poll(state: Any) -> None:
            if then is not None:
                then(state)
            if state.now - last["poll"] < LIVE_EVERY_S or state.run_dir is None:
                return
            last["poll"] = state.now
            wall = time.time()
            if state.now - last["split"] >= SPLIT_EVERY_S:
                last["split"] = state.now
                split[0] = compute_goodput(state.history, state.faults, now=wall, launched=wall - state.now)
            self.metrics.live(experiment, state.run_dir.name, wall - state.now, state, split[0])

        return on_poll

    def after_run(self, run_dir: Path, console: Any) -> None:
        """``finished`` for the run in ``run_dir``; a failed write or push is said, and the runs go on (the journal
        keeps every figure)."""
        if not self.enabled:
            return
        from chaos.report.journal import Journal

        try:
            self.finished(Journal.read(run_dir))
        except UsageError as exc:
            console.print(f"[yellow]metrics not exported:[/] {exc} (the run's figures are in {run_dir}/journal.json)")

    def finished(self, journal: "Journal") -> None:
        """Fill in a finished run, then write the textfile and push, as asked."""
        self.metrics.finished(journal)
        if self.textfile:
            self.metrics.write_textfile(self.textfile)
        if self.pushgateway:
            self.metrics.push(self.pushgateway, journal.experiment, journal.folder.name)


def add_arguments(p: Any) -> None:
    """The metrics options of ``chaos run`` and ``chaos gameday``."""
    p.add_argument("--metrics-textfile", metavar="PATH.prom",
                   help="write the runs' metrics here in the node exporter's textfile format (rewritten after each "
                        "run)")
    p.add_argument("--metrics-pushgateway", metavar="URL",
                   help="push each finished run's metrics to this Prometheus Pushgateway (e.g. http://127.0.0.1:9091)")
    p.add_argument("--metrics-port", type=int, metavar="PORT",
                   help="serve the metrics on 127.0.0.1:PORT/metrics while the runs go, updated live")


def outputs_of(args: Any) -> Outputs:
    return Outputs(args.metrics_textfile, args.metrics_pushgateway, args.metrics_port)
