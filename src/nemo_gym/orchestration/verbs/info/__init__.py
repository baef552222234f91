"""``gym eval info``: everything about a run's benchmarks in one place."""
