"""The run loop: the runner that launches the workload, fires triggers, injects and reverts faults and
judges the checks; the live view; the plugin builders; the fault-free (golden) run.
"""
