"""``chaos verify-checkpoint PATH``: judge a checkpoint on disk (exit 0 valid, 1 invalid, 2 unusable input)."""

from __future__ import annotations

import argparse
import json
import sys

from chaos.checkpoint.verify import Report, UnusableInput, verify


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "verify-checkpoint",
        help="verify a checkpoint: manifest dir, DCP dir, torch.save file or a root with 'latest' "
             "(exit 0 valid, 1 invalid, 2 unusable input)")
    p.add_argument("path", metavar="PATH", help="a step directory, a torch.save file, or a checkpoint root")
    p.add_argument("--json", action="store_true", help="print the full report as JSON")
    p.add_argument("--load", action=argparse.BooleanOptionalAction, default=None,
                   help="also load the state into memory (default: only where no manifest checksums prove the bytes)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        report = verify(args.path, load=args.load)
    except UnusableInput as exc:
        if args.json:
            print(json.dumps({"path": args.path, "ok": None, "error": str(exc)}))
        else:
            print(f"chaos: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.to_json(), indent=1))
    else:
        print("\n".join(render(report)))
    return 0 if report.ok else 1


def render(report: Report, indent: str = "") -> list[str]:
    """Human lines: a verdict per checkpoint, its problems, then notes."""
    verdict = "VALID" if report.ok else "INVALID"
    rate = report.bytes / report.seconds / 1e6 if report.seconds else 0.0
    head = f"{indent}{verdict:7} {report.kind:14} {report.path}"
    if report.kind != "root" or not indent:
        head += f"  ({report.files} files, {_mb(report.bytes)}"
        head += f", {report.seconds:.2f} s, {rate:.0f} MB/s)" if report.seconds else ")"
    lines = [head]
    lines += [f"{indent}  ! {p}" for p in report.problems]
    for child in report.children:
        lines += render(child, indent + "  ")
    if report.kind == "root":
        if report.latest is not None:
            lines.append(f"{indent}  latest -> {report.latest}")
        if report.step is not None:
            lines.append(f"{indent}  newest valid step: {report.step}")
    lines += [f"{indent}  note: {n}" for n in report.notes]
    return lines


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n} B"
