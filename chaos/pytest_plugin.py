"""pytest plugin: ``pytest experiments/`` runs each experiment file as a test item (works under ``-n``).

Heavy imports happen inside the hooks so ``pytest --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

LONG_S = 900
"""An experiment allowed longer than this is a long one (a game day): skipped unless --chaos-long."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("chaos", "chaos experiments")
    group.addoption("--chaos-runs-dir", default="runs",
                    help="where experiment run directories are written (default: ./runs)")
    group.addoption("--chaos-long", action="store_true",
                    help=f"also run long experiments (timeout_s over {LONG_S} s, e.g. a 20-minute game day)")
    group.addoption("--chaos-all-yaml", action="store_true",
                    help="collect every *.yaml as an experiment, not only files in an 'experiments' folder")


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.suffix not in (".yaml", ".yml"):
        return None
    if "experiments" not in file_path.parts and not parent.config.getoption("--chaos-all-yaml"):
        return None
    return ExperimentFileCollector.from_parent(parent, path=file_path)


HOST_KUBERNETES = "host-kubernetes"
"""The xdist_group of the tests that bring up this host's one local Kubernetes (chaos/kube/minicluster.py's lock:
they queue for it). Under ``pytest --dist loadgroup`` they run one after another on one worker, instead of each
holding a worker idle while it waits its turn."""


class ExperimentFileCollector(pytest.File):
    def collect(self) -> Any:
        item = ExperimentItem.from_parent(self, name=self.path.stem)
        if _local_kubernetes(self.path):
            item.add_marker(pytest.mark.xdist_group(HOST_KUBERNETES))
        yield item


def _local_kubernetes(path: Path) -> bool:
    """Does the experiment run on a throwaway local Kubernetes (target kubernetes, cluster: local)? A file that does
    not read is no group's: its run says what is wrong with it."""
    import yaml

    try:
        target = (yaml.safe_load(path.read_text()) or {}).get("target")
    except (OSError, yaml.YAMLError, AttributeError):
        return False
    return isinstance(target, dict) and target.get("kind") == "kubernetes" and target.get("cluster", "local") == "local"


class ExperimentFailed(Exception):
    pass


class ExperimentItem(pytest.Item):
    def runtest(self) -> None:
        from chaos.errors import CapabilityError, ChaosError, ExperimentError
        from chaos.spec.load import load_experiment
        from chaos.run.session import run_experiment

        try:
            exp = load_experiment(self.path)
        except ExperimentError as exc:
            raise ExperimentFailed(f"invalid experiment:\n{exc}") from None
        if exp.timeout_s > LONG_S and not self.config.getoption("--chaos-long"):
            pytest.skip(f"a long experiment (timeout_s {exp.timeout_s:g} s): run it with 'pytest {self.path} "
                        f"--chaos-long' or 'chaos {'gameday' if exp.gameday else 'run'} {self.path}'")
        runs_root = Path(self.config.getoption("--chaos-runs-dir"))
        if exp.gate is not None:
            return self._coverage(exp, runs_root)
        try:
            report = run_experiment(exp, runs_root)
        except CapabilityError as exc:
            pytest.skip(f"{exc}")
        except ChaosError as exc:
            raise ExperimentFailed(f"harness error: {exc}") from None
        self.user_properties.append(("run_dir", str(report.run_dir)))
        if exp.known_failure is not None:
            matched, why = known_failure_matches(exp.known_failure, report)
            if matched:
                pytest.xfail(why)
            raise ExperimentFailed(f"{why}; if the stack was fixed, drop known_failure from {self.path.name}\n"
                                   + _summary(report))
        if report.exit_code != 0:
            raise ExperimentFailed(_summary(report))

    def _coverage(self, exp: Any, runs_root: Path) -> None:
        """A coverage plan (a gate: section) passes when its requirements hold (chaos coverage's exit 0)."""
        from chaos.errors import CapabilityError
        from chaos.gate.coverage import run_coverage

        try:
            cov = run_coverage(exp, runs_root)
        except CapabilityError as exc:
            pytest.skip(f"{exc}")
        self.user_properties.append(("run_dir", cov.folder))
        code, why = cov.problems()
        if code != 0:
            raise ExperimentFailed(f"the gate's coverage does not hold (exit {code}):\n" + cov.markdown())

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, ExperimentFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"experiment: {self.name}"


def known_failure_matches(known: Any, report: Any) -> tuple[bool, str]:
    """Did the run fail exactly as the experiment's ``known_failure`` records: those checks FAIL, every
    other one PASSes, and everything was reverted? Anything else is news (a fix, or a new failure)."""
    import re

    failed = sorted({r.kind for r in report.checks if r.verdict == "fail"})
    others = sorted({r.kind for r in report.checks if r.verdict not in ("pass", "fail")})
    # The same checks failing is not enough: each must fail with the finding it is known by.
    unlike = [f"{r.kind} failed otherwise ({r.reason[:160]!r} does not match {known.signature.get(r.kind)!r})"
              for r in report.checks if r.verdict == "fail" and r.kind in known.signature
              and not re.search(known.signature[r.kind], r.reason)]
    if failed == sorted(set(known.checks)) and not others and not unlike and not report.revert_failures:
        upstream = f" ({known.upstream})" if known.upstream else ""
        return True, f"known failure of the stack: {', '.join(failed)}: {known.reason}{upstream}"
    return False, (f"the known failure ({', '.join(known.checks)} FAIL) did not happen as recorded: failed "
                   f"{', '.join(failed) or 'none'}; neither pass nor fail: {', '.join(others) or 'none'}"
                   + "".join(f"; {u}" for u in unlike)
                   + ("; revert failures" if report.revert_failures else ""))


def _summary(report: Any) -> str:
    from chaos.report.terminal import summary_text

    return f"experiment failed (exit {report.exit_code}):\n{summary_text(report)}"
