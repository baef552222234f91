"""Fakes for fast tests of the generated bash scripts: a fake Slurm and a fake connection."""

from .cluster import FakeCluster
from .connection import FakeConnection

__all__ = ["FakeCluster", "FakeConnection"]
