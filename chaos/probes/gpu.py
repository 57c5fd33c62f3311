"""Probes for GPU faults: NVML (the monitor's real path), DCGM (the dcgm sink), /dev/kmsg and the journal (kernel-log sinks and sources)."""

from __future__ import annotations

import os
import shutil

from chaos.probes.base import Host, ProbeResult, probe


@probe("nvml", "xid: the monitor reads real NVML events and device state (sink nvml is simulated without it)")
def nvml(host: Host) -> ProbeResult:
    try:
        import pynvml
    except ImportError:
        return ProbeResult(False, "pynvml is not installed (the simulated NVML state is used instead)",
                           "pip install nvidia-ml-py")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return ProbeResult(False, f"NVML does not initialise: {exc} (no NVIDIA driver or GPU; simulated NVML is used)",
                           "install the NVIDIA driver on a GPU host (libnvidia-ml.so)")
    try:
        count = pynvml.nvmlDeviceGetCount()
        driver = pynvml.nvmlSystemGetDriverVersion()
    finally:
        pynvml.nvmlShutdown()
    return ProbeResult(True, f"NVML: {count} GPU(s), driver {driver}")


@probe("dcgm", "xid sink dcgm: dcgmi test --inject -f 230")
def dcgm(host: Host) -> ProbeResult:
    if shutil.which("dcgmi") is None:
        return ProbeResult(False, "dcgmi is not installed", "install datacenter-gpu-manager and start nv-hostengine")
    res = host.shell.run(["dcgmi", "discovery", "-l"], check=False, timeout=10)
    if not res.ok:
        return ProbeResult(False, f"dcgmi cannot reach a host engine: {(res.stderr or res.stdout).strip()[:200]}",
                           "start it: nv-hostengine")
    return ProbeResult(True, "dcgmi reaches nv-hostengine")


@probe("kmsg", "xid sink kmsg (opt-in allow_kmsg: true) and the monitor's kmsg source")
def kmsg(host: Host) -> ProbeResult:
    if not os.path.exists("/dev/kmsg"):
        return ProbeResult(False, "/dev/kmsg does not exist here", "use sink: file (the default)")
    readable = os.access("/dev/kmsg", os.R_OK)
    writable = os.geteuid() == 0 and os.access("/dev/kmsg", os.W_OK)
    if not writable:
        return ProbeResult(False, f"/dev/kmsg is {'readable' if readable else 'not readable'} but not writable",
                           "run as root to inject real kernel-log XIDs (staging nodes only)")
    # Said, not done: writing the real kernel log is only ever done by an experiment that opts in.
    return ProbeResult(True, "/dev/kmsg readable and writable as root; an experiment must still opt in with "
                             "allow_kmsg: true")


@probe("journal", "the monitor's journal source (journalctl -k -f)")
def journal(host: Host) -> ProbeResult:
    if shutil.which("journalctl") is None:
        return ProbeResult(False, "journalctl is not installed", "use the kmsg or file source")
    res = host.shell.run(["journalctl", "-k", "-n", "1", "--no-pager"], check=False, timeout=10)
    if not res.ok:
        return ProbeResult(False, f"journalctl -k fails: {(res.stderr or res.stdout).strip()[:200]}",
                           "run systemd-journald, or follow /dev/kmsg (source kmsg)")
    return ProbeResult(True, "journalctl -k works")
