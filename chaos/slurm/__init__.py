"""Slurm: a throwaway real cluster on this host (``minicluster``), the job's batch script (``batch``),
and the client commands the harness follows and steers a job with (``control``)."""
