"""The driver: its container and environment, and the benchmarks it runs (how each is prepared and
run, resumed, sharded and exported)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Discriminator, PrivateAttr, Tag, field_validator, model_validator

from nemo_gym.orchestration import rules
from nemo_gym.orchestration.api.env import EnvSource, _remember_env_sources, _resolve_env_field
from nemo_gym.orchestration.api.strict import _StrictModel
from nemo_gym.orchestration.backends import slurm_rules
from nemo_gym.orchestration.errors import error_at

POLICY_HOST = "localhost"  # the default of driver.policy_host


class ResumeConfig(_StrictModel):
    """Extension beyond the spec, as in NeMo Gym 0.7.0: how far a resumable benchmark's chain of
    jobs may go. A job that times out or is preempted after writing new rollouts resumes for free
    (within ``max_walltime``, summed over the chain); any other resume spends one of ``max_retries``
    (a node failure, a service dying mid-run, a job that made no progress)."""

    max_retries: int = 3
    max_walltime: str | None = None

    _check_retries = field_validator("max_retries")(rules.non_negative)
    _check_walltime = field_validator("max_walltime")(slurm_rules.optional_time_cap)


# Where a benchmark's unchecked_keys may point: its run and prepare mappings.
UNCHECKED_SECTIONS = ("run.", "prepare.")


def _resume_shape(v: Any) -> str:
    return "caps" if isinstance(v, (dict, ResumeConfig)) else "flag"


# ``true``/``false``, or the caps as a mapping; tagged so an error names one shape, not both.
Resumable = Annotated[Annotated[bool, Tag("flag")] | Annotated[ResumeConfig, Tag("caps")], Discriminator(_resume_shape)]


class BenchmarkRunConfig(_StrictModel):
    prepare: dict[str, Any] = {}
    run: dict[str, Any] = {}
    # Extension beyond the spec (NeMo Gym 0.7.0's field): requeue this benchmark's job when it
    # times out, is preempted or loses a node, and continue from the rollouts already written.
    resumable: Resumable = False
    # Extension beyond the spec: this benchmark's exports, over ``job.export`` (see JobConfig).
    export: dict[str, dict[str, Any] | None] | None = None
    # NeMo Gym 0.7.0's field: a shell script the driver runs instead of ``gym eval run`` (prepare
    # still runs first). Whether ``run`` is empty beside it is checked with the policy wiring,
    # which ``SubmitConfig`` adds to ``run`` (see ``SubmitConfig._check_command_runs_alone``).
    command: str | None = None
    # Extension beyond the spec: run/prepare keys (``run.num_repeat``) passed to gym as written, not
    # checked against what gym reads when a run is staged (see preflight.py).
    unchecked_keys: list[str] = []
    # Extension beyond the spec: split the benchmark's tasks into this many slices, each a job with
    # its own deployment, merged into one benchmark by gym eval aggregate (None: job.shards).
    shards: int | None = None

    _check_shards = field_validator("shards")(rules.optional_shards)
    _no_bool_shards = field_validator("shards", mode="before")(rules.not_a_bool)

    @property
    def resume_config(self) -> ResumeConfig | None:
        if self.resumable is False:
            return None
        return ResumeConfig() if self.resumable is True else self.resumable

    @model_validator(mode="after")
    def _check_command(self) -> BenchmarkRunConfig:
        if self.command is None:
            return self
        if not self.command.strip():
            raise error_at("command", "is empty; give the shell script to run, or remove command")
        if self.resume_config is not None:
            raise error_at(
                "command",
                "is set together with resumable, but a resumed job can only tell `gym eval run` to "
                "continue from its cache, so a command would start over from zero; drop resumable, "
                "or drop command and configure run",
            )
        return self

    @field_validator("unchecked_keys")
    @classmethod
    def _check_unchecked_keys(cls, v: list[str]) -> list[str]:
        for key in v:
            if not key.startswith(UNCHECKED_SECTIONS) or key in UNCHECKED_SECTIONS:
                raise ValueError(
                    f"{key!r} names no run or prepare key; write it as run.<key> or prepare.<key>, "
                    f"e.g. run.{key.split('.')[-1] or 'num_repeats'}"
                )
        return v

    @model_validator(mode="after")
    def _check_resume_from_cache(self) -> BenchmarkRunConfig:
        if self.resume_config is not None and self.run.get("resume_from_cache") in (False, "false", "False"):
            raise ValueError(
                "resumable needs gym to resume from its cache, but run.resume_from_cache is false; "
                "drop run.resume_from_cache or drop resumable"
            )
        return self


class GymInstallConfig(_StrictModel):
    ref: str
    repo: str = "https://github.com/NVIDIA-NeMo/gym"

    _check_ref = field_validator("ref", "repo")(rules.single_line_nonempty)


class DriverConfig(_StrictModel):
    benchmarks: dict[str, BenchmarkRunConfig]
    container: str = "python:3.12"
    env: dict[str, str] = {}
    gym_install: GymInstallConfig | None = None
    mounts: list[str] = []
    policy_model: str | None = None
    policy_model_type: str = "openai_model"
    # NeMo Gym 0.7.0's field: the host in the injected policy_base_url. Composition has already
    # resolved any ${oc.env:...} in it (on the submitting machine), so it is checked as a host.
    policy_host: str = POLICY_HOST

    _env_sources: dict[str, EnvSource] = PrivateAttr(default_factory=dict)
    _check_policy_host = field_validator("policy_host")(rules.host)

    @field_validator("env", mode="before")
    @classmethod
    def _resolve_env_prefixes(cls, v: dict[str, str]) -> dict[str, str]:
        return _resolve_env_field(cls, v)

    _keep_env_sources = model_validator(mode="wrap")(_remember_env_sources)

    _check_mounts = field_validator("mounts")(rules.mount_list)
    _check_benchmark_names = field_validator("benchmarks")(rules.benchmark_names)
