"""``chaos assess``: from a user's training job to a resilience report card.

``job`` (how the user's job is launched, as a workload section, and the stack its source imports), ``observe`` (one
fault-free run of it watched: the protocol or a step pattern in its output, its step time, its saves, its world
size), ``plan`` (a battery of experiments placed where each fault bites, and what does not apply with the
reason), ``card`` (each experiment's verdicts and figures as one row per failure class, the finding and its
remedy, and the cost at scale) and ``render`` (the card as a terminal table, report.md, report.html and
card.json). Each experiment runs through the one runner every experiment uses, and is written as a YAML file
the user keeps as their CI gate."""
