"""The ``chaos`` command line. Each subcommand is one module in ``chaos.commands`` with ``register(subparsers)``."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import signal
import sys

from chaos import __version__
from chaos.errors import ChaosError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # exit 2 with the way out, like argparse but with a hint
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}\nRun '{self.prog} --help' for usage.", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="chaos", description="Chaos experiments for distributed PyTorch training.")
    parser.add_argument("--version", action="version", version=f"chaos {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    import chaos.commands as pkg

    for mod in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if not mod.name.startswith("_"):
            importlib.import_module(f"chaos.commands.{mod.name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except ChaosError as exc:
        print(f"chaos: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("chaos: interrupted", file=sys.stderr)
        return 130


def entry() -> int:
    """The ``chaos`` command (console script and ``python -m chaos``): ``main``, then an exit that a late
    signal cannot turn into another status.

    Once the command has returned, its status is decided and what it had to write is written. A Ctrl-C
    or SIGTERM that lands while the interpreter shuts down would otherwise end the process by the
    signal (-2, no traceback: finalization puts Python's handlers back to the default) instead of with
    that status; ignored, it cannot. Ignoring survives finalization, a handler does not. Not in
    ``main``: tests call it in their own process, whose signal handling is not the command's to change."""
    code = main()
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, signal.SIG_IGN)
    return code
