"""The base of every config model: a key the spec does not know is an error, never dropped in
silence (a misspelt key would otherwise leave its default in force)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class _StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
