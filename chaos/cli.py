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


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser; given the command line, only the subcommand it names is imported and registered.

    Each command module imports what its command needs (``run`` the runner and pydantic models,
    ``report`` the HTML and plotting code), ~0.2 CPU-s in all: ``chaos cleanup`` or ``chaos doctor``
    need not pay for the others. Without a known command name (``chaos``, ``chaos --help``, a typo)
    every command is registered, so help and the error list them all."""
    parser = _Parser(prog="chaos", description="Chaos experiments for distributed PyTorch training.")
    parser.add_argument("--version", action="version", version=f"chaos {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    import chaos.commands as pkg

    names = sorted(m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_"))
    first = next((a for a in argv or [] if not a.startswith("-")), None)
    named = first.replace("-", "_") if first is not None else None
    for name in [named] if named in names else names:
        importlib.import_module(f"chaos.commands.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv)
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
