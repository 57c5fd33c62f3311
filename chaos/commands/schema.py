"""``chaos schema``: print the JSON Schema of experiment files (for editor autocompletion)."""

from __future__ import annotations

import argparse
import json

from chaos.spec.schema import json_schema


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("schema", help="print the JSON Schema of experiment files")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print(json.dumps(json_schema(), indent=2))
    return 0
