"""A health gate's coverage: run a user's health check under each fault of a list and on healthy runs, and judge
each run (``cell``: caught, in how long, or missed, hung, untested, a false alarm), the matrix and its requirement
(``matrix``), and the runs themselves (``coverage``, through the one runner every experiment uses)."""
