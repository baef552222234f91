"""``gym eval logs``: a job's, a service's or the driver's log."""
