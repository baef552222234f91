"""``gym eval report``: runs as one self-contained HTML file."""
