"""``gym eval history``: the results store read across runs, sweeps and users."""
