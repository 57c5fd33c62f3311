"""What really happened, as data: the event records and the run's history (one attempt rule), the
checkpoint lineage, recovery figures, goodput, the checkpoint witness, fault records and verdicts.
Functions of the records; the one process here is the witness's child, which looks at checkpoints while
the run goes on.
"""
