"""``gym eval view``: a read-only web view of runs, sweeps and the results store's history."""
