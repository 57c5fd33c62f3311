"""The experiment file and what it becomes: a typed, validated ``Experiment`` (the workload, faults with their
triggers, checks, target, game day), the config bases every plugin's settings extend, the JSON Schema.
The ground floor: it imports nothing of the harness but the errors and the registries.
"""
