"""``gym eval resubmit``: what is unfinished, finished in place."""
