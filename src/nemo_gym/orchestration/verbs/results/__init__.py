"""``gym eval results``: one run's results, or several side by side."""
