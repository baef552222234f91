"""``gym eval gate``: GO / NO-GO over a suite of benchmarks, from a policy file."""
