"""``gym eval export``: a run's exports run (or rerun) from here, on its submit host."""
