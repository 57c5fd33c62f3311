"""Probe for what a killed run left behind that ``chaos cleanup`` can no longer find.

``chaos cleanup`` reverts from a run's ledger, found through the run's directory. A harness killed
without a chance to revert (SIGKILL, a machine or container restart) whose run directory was
then deleted leaves its network namespaces with no ledger to undo them: measured here, an
environment restart in the middle of the suite, then ``rm -rf runs/tests``, left seven
``chaos-*`` namespaces that every later run and ``chaos cleanup`` passed over in silence.
"""

from __future__ import annotations

import time
from pathlib import Path

from chaos.probes.base import Host, ProbeResult, probe
from chaos.runtime.ledger import LEDGER_NAME, Ledger, unfinished_runs

PREFIX = "chaos-"
DOCTOR_PREFIX = "chaos-doctor-"  # the doctor's own throwaway namespace (chaos.probes.base.Host.netns)
NETNS_DIR = Path("/run/netns")  # where `ip netns add` mounts each named namespace
# A run makes its namespaces before its ledger names them and before anything runs in them: a
# namespace younger than this is a run starting up, not an abandoned one.
YOUNG_S = 120.0


def _young(name: str) -> bool:
    try:
        return time.time() - (NETNS_DIR / name).stat().st_mtime < YOUNG_S
    except OSError:
        return False  # its age cannot be read: judged by ledgers and processes alone


def classify_namespaces(host: Host) -> dict[str, list[str]]:
    """The host's ``chaos-*`` namespaces by who owns them: ``live`` (a run whose harness is running),
    ``unfinished`` (a run's ledger that ``chaos cleanup`` can undo) and ``orphan`` (no ledger names it,
    nothing runs in it)."""
    listed = host.shell.run(["ip", "netns", "list"], check=False)
    names = [line.split()[0] for line in listed.stdout.splitlines()
             if line.startswith(PREFIX) and not line.startswith(DOCTOR_PREFIX)]
    ledgers = []  # (ledger text, harness alive)
    for run_dir in unfinished_runs():
        try:
            ledgers.append(((run_dir / LEDGER_NAME).read_text(errors="replace"), Ledger(run_dir).harness_alive()))
        except OSError:
            continue
    out: dict[str, list[str]] = {"live": [], "unfinished": [], "orphan": []}
    for name in names:
        owners = [alive for text, alive in ledgers if name in text]
        if owners:
            out["live" if any(owners) else "unfinished"].append(name)
            continue
        pids = host.shell.run(["ip", "netns", "pids", name], check=False)
        # Something runs there, or it was made moments ago (a run starting up, or not ours): not for
        # the doctor to call abandoned.
        in_use = not pids.ok or bool(pids.stdout.strip()) or _young(name)
        out["live" if in_use else "orphan"].append(name)
    return out


@probe("leftovers", "nothing left behind by a killed run: chaos-* network namespaces", needs=("root",))
def leftovers(host: Host) -> ProbeResult:
    found = classify_namespaces(host)
    if found["orphan"]:
        return ProbeResult(False, f"{len(found['orphan'])} chaos network namespace(s) no run owns, with nothing running "
                                  f"in them (a harness killed without reverting, its run directory deleted): "
                                  f"{', '.join(found['orphan'])}",
                           "; ".join(f"ip netns del {n}" for n in found["orphan"]))
    if found["unfinished"]:
        return ProbeResult(False, f"{len(found['unfinished'])} chaos network namespace(s) of runs whose harness died "
                                  f"before reverting: {', '.join(found['unfinished'])}", "chaos cleanup")
    live = f" ({len(found['live'])} in use or just made by running jobs)" if found["live"] else ""
    return ProbeResult(True, f"no chaos network namespaces left behind{live}")
