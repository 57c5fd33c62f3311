"""The findings table of docs/stacks.md, generated from the journals of the stack experiments' runs.

    python -m pytest experiments -k stateful --chaos-runs-dir runs/stacks   # (or chaos run ...)
    python ci/stacks_table.py runs/stacks --write                            # rewrites the table in docs/stacks.md

Each row is one run of an experiment whose workload is a stack's (STACKS): the stack and the version
that ran, the fault, each check's verdict and the fault's detect_s and resume_s. Golden (fault-free) runs are left
out. Nothing in the table is typed by hand.
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


def version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def rows(runs: Path) -> list[list[str]]:
    out = []
    for journal in sorted(runs.rglob("journal.json")):
        j = json.loads(journal.read_text())
        if j["experiment"].endswith("-golden"):
            continue
        exp = j.get("source") or ""
        script = _script(exp)
        if script not in STACKS:
            continue
        stack, dist = STACKS[script]
        verdicts = {c["kind"]: c["verdict"].upper() for c in j["checks"]}
        faults = ", ".join(f["label"] for f in j["faults"]) or "none"
        recovery = [f["recovery"] for f in j["faults"] if f.get("recovery")]
        out.append([stack, version(dist), f"`{Path(exp).name}`", faults,
                    *(verdicts.get(c, "-") for c in CHECKS),
                    *(", ".join(f"{r[m]:.1f} s" for r in recovery if r.get(m) is not None) or "-"
                      for m in ("detect_s", "resume_s"))])
    return out


def _script(experiment: str) -> str | None:
    try:
        import yaml

        path = Path(experiment)
        doc = yaml.safe_load((path if path.exists() else ROOT / path).read_text())
        return Path(str(doc["workload"].get("script") or "")).name
    except (OSError, KeyError, TypeError, ValueError):
        return None


def table(runs: Path) -> str:
    head = ["stack", "version", "experiment", "fault", *CHECKS, "detect_s", "resume_s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows(runs)]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", type=Path, help="a runs directory (chaos run --runs-dir, pytest --chaos-runs-dir)")
    ap.add_argument("--write", action="store_true", help=f"replace the table in {DOC.relative_to(ROOT)}")
    args = ap.parse_args()
    text = table(args.runs)
    if text.count("\n") < 2:
        print(f"no run of a stack experiment under {args.runs}", file=sys.stderr)
        return 1
    if not args.write:
        print(text)
        return 0
    doc = DOC.read_text()
    if BEGIN not in doc or END not in doc:
        print(f"{DOC} has no {BEGIN} ... {END} markers", file=sys.stderr)
        return 1
    DOC.write_text(doc[:doc.index(BEGIN) + len(BEGIN)] + "\n" + text + "\n" + doc[doc.index(END):])
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
