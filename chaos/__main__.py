"""``python -m chaos``: the same CLI as the ``chaos`` console script."""

from chaos.cli import entry

raise SystemExit(entry())
