"""``gym eval watch``: each checkpoint a training run writes, evaluated once."""
