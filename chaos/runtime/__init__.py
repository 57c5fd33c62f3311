"""What a fault, target or check may touch while a run is live: the run context and its clock, the shell
that logs every command, the process tree, the torchrun command line, network namespaces, the
ledger of undos and the safety net that reverts them, the host's speed.
"""
