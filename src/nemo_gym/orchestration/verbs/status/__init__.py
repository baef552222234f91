"""``gym eval list`` and ``gym eval status``: the runs there are, and what their jobs are doing."""
