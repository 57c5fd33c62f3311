"""The findings tables of docs/stacks.md, generated from the journals of the stack experiments' runs.

    python -m pytest experiments -k stateful --chaos-runs-dir runs/stacks   # (or chaos run ...)
    python ci/stacks_table.py runs/stacks --write                            # rewrites the tables in docs/stacks.md

Each row is one run of an experiment whose workload is a stack's (STACKS) or a fault-tolerance framework's
(FRAMEWORKS, a table of their own: their recovery is not checkpoint-restart, and their checks are others): the
stack and the version that ran, the fault, each check's verdict and the fault's detect_s and resume_s. Golden
(fault-free) runs are left out. Nothing in the tables is typed by hand.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "stacks.md"
BEGIN, END = "<!-- stacks-table:begin -->", "<!-- stacks-table:end -->"
STACKS = {"stateful_loader.py": ("torchdata StatefulDataLoader, num_workers 2", "torchdata"),
          "accelerate_loop.py": ("Accelerate save_state/load_state + skip_first_batches, num_workers 2", "accelerate"),
          "hf_trainer.py": ("HF Trainer checkpoint-N + get_last_checkpoint, dataloader_num_workers 2", "transformers"),
          "lightning_ddp.py": ("Lightning DDP, ModelCheckpoint + fit(ckpt_path=\"last\"), num_workers 2", "lightning")}
"""Workload script -> (stack, the distribution whose version is reported)."""
CHECKS = ("completes", "struck_mid_save", "exactly_once", "checkpoint_integrity", "matches_golden", "detection",
          "rolled_back", "no_corrupt_commit")
FRAMEWORKS = {"torchft_ddp.py": ("torchft, drop-replica (replica groups under a lighthouse)", "torchft-nightly"),
              "nvrx_inprocess.py": ("NVRx inprocess.Wrapper, in-process restart", "nvidia-resiliency-ext")}
"""Workload script -> (framework and the recovery it implements, its distribution)."""
LAUNCHERS = {"ft_launcher": ("NVRx ft_launcher, heartbeat hang detection and restart", "nvidia-resiliency-ext")}
"""workload.launcher -> the framework a run under it judges, whatever its script."""
FRAMEWORK_CHECKS = ("completes", "survivor_progress", "replicas_converge", "drop_replica_samples",
                    "restarted_in_process", "detection", "matches_golden")
FBEGIN, FEND = "<!-- frameworks-table:begin -->", "<!-- frameworks-table:end -->"


def version(dist: str, python: str | None = None) -> str:
    """``dist``'s version as the run's interpreter sees it (workload.python: the job's own environment, e.g.
    torchft 0.2.0 layered over the harness's nightly, where the first distribution of the module is the one that
    ran)."""
    if python is not None:
        from chaos.spec import interpreter

        from chaos.errors import CapabilityError

        module = MODULES.get(dist, dist)
        try:
            found = interpreter.providers(python, (module,)).get(module)
        except CapabilityError:  # the environment is not on this machine (any more): say so, not a version
            return f"unknown ({python} does not run here)"
        return found[1] if found else "not installed"
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


MODULES = {"torchft-nightly": "torchft", "nvidia-resiliency-ext": "nvidia_resiliency_ext"}
"""A distribution -> the module a workload imports from it (the same module may come from another distribution in
a workload.python environment)."""


def rows(runs: Path, frameworks: bool = False) -> list[list[str]]:
    out = []
    for journal in sorted(runs.rglob("journal.json")):
        j = json.loads(journal.read_text())
        if j["experiment"].endswith("-golden"):
            continue
        exp = j.get("source") or ""
        script, launcher, python = _workload(exp)
        if frameworks:
            found = LAUNCHERS.get(launcher or "") or FRAMEWORKS.get(script or "")
            checks = FRAMEWORK_CHECKS
        else:
            found, checks = STACKS.get(script or ""), CHECKS
        if found is None:
            continue
        stack, dist = found
        verdicts = {c["kind"]: c["verdict"].upper() for c in j["checks"]}
        faults = ", ".join(f["label"] for f in j["faults"]) or "none"
        recovery = [f["recovery"] for f in j["faults"] if f.get("recovery")]
        out.append([stack, version(dist, python), f"`{Path(exp).name}`", faults,
                    *(verdicts.get(c, "-") for c in checks),
                    *(", ".join(f"{r[m]:.1f} s" for r in recovery if r.get(m) is not None) or "-"
                      for m in ("detect_s", "resume_s"))])
    return out


def _workload(experiment: str) -> tuple[str | None, str | None, str | None]:
    """(the workload script's file name, workload.launcher, workload.python found or None) of an experiment file."""
    try:
        import yaml

        from chaos.spec import interpreter

        path = Path(experiment)
        path = path if path.exists() else ROOT / path
        w = yaml.safe_load(path.read_text())["workload"]
        python = w.get("python")
        found = interpreter.find(str(python), path) if python else None
        return Path(str(w.get("script") or "")).name, w.get("launcher"), str(found or python) if python else None
    except (OSError, KeyError, TypeError, ValueError):
        return None, None, None


def table(runs: Path, frameworks: bool = False) -> str:
    head = ["framework" if frameworks else "stack", "version", "experiment", "fault",
            *(FRAMEWORK_CHECKS if frameworks else CHECKS), "detect_s", "resume_s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows(runs, frameworks)]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", type=Path, help="a runs directory (chaos run --runs-dir, pytest --chaos-runs-dir)")
    ap.add_argument("--write", action="store_true", help=f"replace the table in {DOC.relative_to(ROOT)}")
    args = ap.parse_args()
    tables = {(BEGIN, END): table(args.runs), (FBEGIN, FEND): table(args.runs, frameworks=True)}
    if all(text.count("\n") < 2 for text in tables.values()):
        print(f"no run of a stack or framework experiment under {args.runs}", file=sys.stderr)
        return 1
    if not args.write:
        print("\n\n".join(tables.values()))
        return 0
    doc = DOC.read_text()
    for (begin, end), text in tables.items():
        if begin not in doc or end not in doc:
            print(f"{DOC} has no {begin} ... {end} markers", file=sys.stderr)
            return 1
        if text.count("\n") < 2:
            continue  # no run of that kind here: the table in the doc stays as it was
        doc = doc[:doc.index(begin) + len(begin)] + "\n" + text + "\n" + doc[doc.index(end):]
    DOC.write_text(doc)
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
