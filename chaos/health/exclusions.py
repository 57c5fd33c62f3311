"""The record of devices the health monitor took out of service: ``excluded_devices.json`` in the run directory."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

FILE_NAME = "excluded_devices.json"
FILE_ENV = "CHAOS_EXCLUDED_DEVICES_FILE"


def exclusions_path(run_dir: str | os.PathLike[str] | None = None) -> Path:
    """``$CHAOS_EXCLUDED_DEVICES_FILE``, else ``<run_dir or $CHAOS_RUN_DIR or .>/excluded_devices.json``."""
    if run_dir is None and os.environ.get(FILE_ENV):
        return Path(os.environ[FILE_ENV])
    return Path(run_dir or os.environ.get("CHAOS_RUN_DIR") or ".") / FILE_NAME


def read_exclusions(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every exclusion recorded so far (empty when there is no record)."""
    try:
        with open(path, encoding="utf-8") as fh:
            return list(json.load(fh).get("devices", []))
    except FileNotFoundError:
        return []


def add_exclusion(path: str | os.PathLike[str], entry: dict[str, Any]) -> None:
    """Append ``entry`` (device, bus_id, code, rank, attempt, t) under a lock: several ranks may write at once."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{path}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        devices = read_exclusions(path)
        # One device per host: on a multi-node job every node has a device 0.
        if any(d.get("device") == entry.get("device") and d.get("host") == entry.get("host") for d in devices):
            return
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"devices": devices + [entry]}, fh, indent=1)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
