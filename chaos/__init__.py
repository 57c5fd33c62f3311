"""chaos: inject the faults large clusters produce into a torch training job, and prove it recovers."""

__version__ = "0.1.0"
