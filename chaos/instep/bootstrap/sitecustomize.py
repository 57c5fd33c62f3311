"""Loaded by every Python process the job starts, from the folder the harness puts first on PYTHONPATH
only when a run arms an in-step fault (chaos.instep). It costs an import hook that waits for
``torch.optim.optimizer``; once that module has loaded, chaos.instep.rank installs its hooks.

This file hides any other ``sitecustomize`` on the path (Debian ships one), so that one is run first.
"""

import importlib.abc
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_WATCHED = "torch.optim.optimizer"


def _chain() -> None:
    for entry in sys.path:
        if os.path.abspath(entry or os.curdir) == _HERE:
            continue
        candidate = os.path.join(entry or os.curdir, "sitecustomize.py")
        if os.path.isfile(candidate):
            spec = importlib.util.spec_from_file_location("_chaos_hidden_sitecustomize", candidate)
            if spec is not None and spec.loader is not None:
                module = importlib.util.module_from_spec(spec)
                try:
                    spec.loader.exec_module(module)
                except Exception:  # the hidden one failing must not cost the process, as it would not have
                    pass
            return


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs chaos.instep.rank.install right after torch.optim.optimizer has executed."""

    def find_spec(self, name, path, target=None):  # type: ignore[no-untyped-def]
        if name != _WATCHED:
            return None
        sys.meta_path.remove(self)  # once; and the real finder must answer the lookup below
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        run = loader.exec_module

        def exec_module(module):  # type: ignore[no-untyped-def]
            run(module)
            try:
                from chaos.instep import rank

                rank.install()
            except Exception as exc:  # never the training job's failure: say so on its stderr
                print(f"chaos.instep: in-step faults not installed: {type(exc).__name__}: {exc}", file=sys.stderr)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


_chain()
if os.environ.get("CHAOS_INSTEP_DIR"):
    sys.meta_path.insert(0, _AfterImport())
