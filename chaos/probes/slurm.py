"""Probes for the slurm target: the commands its local cluster needs and munge; a user's cluster's controller."""

from __future__ import annotations

import os
import shutil

from chaos.probes.base import Host, ProbeResult, probe
from chaos.slurm.minicluster import missing_commands


@probe("slurm", "target slurm (cluster: local): a throwaway slurmctld + one slurmd per netns node", needs=("netns",))
def slurm(host: Host) -> ProbeResult:
    missing = missing_commands()
    if missing:
        return ProbeResult(False, f"missing {', '.join(missing)}",
                           "apt-get install -y slurm-wlm munge (scripts/setup.sh does it when run as root)")
    version = host.shell.run(["slurmctld", "-V"], check=False).stdout.strip() or "slurmctld (version unknown)"
    # The local cluster runs its own munged with its own key: check that munge itself works here.
    res = host.shell.run(["munged", "--version"], check=False)
    if not res.ok:
        return ProbeResult(False, f"munged does not run: {res.stderr.strip() or res.stdout.strip()}",
                           "apt-get install --reinstall -y munge")
    return ProbeResult(True, f"{version}; munge {(res.stdout or res.stderr).strip().split()[0]}; "
                             f"the local cluster starts per run")


@probe("slurm-existing", "target slurm (cluster: existing): your cluster's controller through $SLURM_CONF")
def slurm_existing(host: Host) -> ProbeResult:
    from chaos.targets.slurm_config import CLIENT_COMMANDS

    missing = [c for c in CLIENT_COMMANDS if shutil.which(c) is None]
    if missing:
        return ProbeResult(False, f"missing {', '.join(missing)}",
                           "run the harness on a login node of the cluster, or apt-get install -y slurm-client")
    conf = os.environ.get("SLURM_CONF") or "Slurm's default slurm.conf"
    ping = host.shell.run(["scontrol", "ping"], check=False, timeout=15)
    if not ping.ok or "UP" not in ping.stdout:
        detail = (ping.stdout + ping.stderr).strip().splitlines()
        return ProbeResult(False, f"no controller answers for {conf}: {detail[-1] if detail else 'no answer'}",
                           "export SLURM_CONF=<your cluster's slurm.conf> (or target.conf in the experiment); "
                           "munged must run with the cluster's key")
    return ProbeResult(True, f"{ping.stdout.strip().splitlines()[0]} ({conf})")
