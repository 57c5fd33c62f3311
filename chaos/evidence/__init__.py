"""What really happened, as data: the event records and the run's history (one attempt rule), the
checkpoint lineage, recovery figures, goodput, the checkpoint witness, fault records and verdicts.
Pure functions of the records; nothing here starts or stops a process.
"""
