"""``gym eval plan``: how many tasks and repeats each benchmark needs, before spending."""
