"""The journal: one typed record, written whole and read back as the same type, with clear errors for a bad one."""

from __future__ import annotations

from pathlib import Path

import pytest

from chaos.errors import UsageError
from chaos.evidence.outcome import CheckResult, FaultRecord
from chaos.report.journal import Journal, read_journals


def a_journal(run_dir: Path) -> Journal:
    fault = FaultRecord(index=0, kind="kill-rank", label="kill-rank#0", t_inject=12.5,
                        details={"pids": [101], "where": Path("/x"), "odd": {1, 2}},
                        recovery={"resume_s": 3.5, "step_rate": {"ratio": 0.5, "before": 4.0}})
    return Journal(experiment="rank-kill", run_dir=str(run_dir), exit_code=1, verdict="FAIL", wall_s=20.0,
                   attempts=["0.0", "0.1"], max_step=40, faults=[fault],
                   checks=[CheckResult("exactly_once", "fail", "index 7 twice", {"duplicates": [7]}),
                           CheckResult("completes", "pass", "ran to 40")],
                   host_speed={"probe_s": 0.2, "before": 0.19, "after": 0.21}, goodput={"goodput": 0.8})


def test_a_journal_reads_back_as_the_same_record(tmp_path: Path) -> None:
    written = a_journal(tmp_path)
    written.write(tmp_path)
    read = Journal.read(tmp_path)
    # Values JSON has no type for are kept as their text, never a crash at the end of a run.
    assert read.faults[0].details == {"pids": [101], "where": "/x", "odd": [1, 2]}
    written.faults[0].details.update(where="/x", odd=[1, 2])
    assert read.model_dump() == written.model_dump() and read.folder == tmp_path
    assert isinstance(read.faults[0], FaultRecord) and read.checks[0].figures == {"duplicates": [7]}
    assert not list(tmp_path.glob(".journal.json*")), "a temporary journal was left behind"


def test_an_old_journal_without_the_newer_fields_still_reads(tmp_path: Path) -> None:
    (tmp_path / "journal.json").write_text('{"experiment": "old", "exit_code": 1, "wall_s": 3, "checks": '
                                           '[{"kind": "completes", "verdict": "pass", "reason": "ok"}], '
                                           '"a_field_from_the_future": 1}')
    old = Journal.read(tmp_path)
    # No verdict field: the word comes from the exit code, and exit 1 with no failed check is INCONCLUSIVE.
    assert old.word == "INCONCLUSIVE" and old.goodput is None and old.checkpoints.saves == 0


@pytest.mark.parametrize("text, says", [
    (None, "has no readable journal.json"),
    ("{not json", "not a journal chaos can read"),
    ('{"exit_code": 0}', "experiment: Field required"),
    ('{"experiment": "x", "checks": [{"kind": "c", "verdict": "maybe", "reason": ""}]}', "checks.0.verdict"),
])
def test_a_broken_journal_is_a_clear_usage_error(tmp_path: Path, text: str | None, says: str) -> None:
    if text is not None:
        (tmp_path / "journal.json").write_text(text)
    with pytest.raises(UsageError, match=says.replace(".", r"\.")):
        Journal.read(tmp_path)


def test_a_folder_of_runs_reads_every_journal_and_refuses_an_empty_one(tmp_path: Path) -> None:
    for name in ("b", "a"):
        (tmp_path / name).mkdir()
        a_journal(tmp_path / name).model_copy(update={"experiment": name}).write(tmp_path / name)
    journals = read_journals([tmp_path])
    assert [(j.experiment, j.folder.name) for j in journals] == [("a", "a"), ("b", "b")]
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="run experiments first"):
        read_journals([tmp_path / "empty"])
