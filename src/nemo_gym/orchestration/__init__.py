"""gym orchestration: one YAML file describing an LLM evaluation, turned into jobs that run."""

__version__ = "0.1.0"
