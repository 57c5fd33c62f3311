"""trainkit: the shared engine of the reference workloads (config, data, model, checkpoints, loop)."""
