"""Probe for the slurm target: the commands its local cluster needs, and munge."""

from __future__ import annotations

from chaos.doctor import Host, ProbeResult, probe
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
