"""``gym eval submit``: compose, validate, plan, then print, dry-run or queue."""
