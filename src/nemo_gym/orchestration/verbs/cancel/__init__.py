"""``gym eval cancel``: the jobs still queued or running of every run named, cancelled."""
