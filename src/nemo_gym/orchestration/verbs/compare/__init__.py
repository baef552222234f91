"""``gym eval compare``: a candidate run against a base run, benchmark by benchmark."""
