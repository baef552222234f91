"""Alembic's scripts for the results store, shipped in the package and run by ``store.open_store``."""
