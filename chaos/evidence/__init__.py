"""What really happened, as data: the event records and the run's history (one attempt rule), the
checkpoint lineage, recovery figures, goodput, the checkpoint witness, fault records and verdicts.
Functions of the records; the one process here is the witness's child, which looks at checkpoints while
the run goes on.
"""

# The harness's record kinds register with chaos.evidence.records.record as they are defined: imported here, they
# are whenever any record is read, whichever module of chaos.evidence brought it in.
from chaos.evidence import harness_records as _harness_records  # noqa: F401
