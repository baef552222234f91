"""A sharded benchmark's shards: the gym commands each shard's driver runs to prepare, run and
merge its slice, and the run keys a shard sets itself."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.overrides import flatten_overrides
from nemo_gym.orchestration.plan.model import ShardPlan

# The run keys a shard's driver sets itself: its slice is its input, unaggregated.
SHARD_RUN_KEYS = ("limit", "reuse_existing_data_preparation", "disable_aggregation")
# How long the merging shard waits for gym's servers to start before it gives up on the merge.
MERGE_START_TIMEOUT = 600


def shard_run(run: dict[str, Any]) -> dict[str, Any]:
    """The run keys of a shard's own gym eval run: the prepared slice, nothing aggregated (a shard merges)."""
    run = {key: value for key, value in run.items() if key not in SHARD_RUN_KEYS}
    return {**run, "reuse_existing_data_preparation": True, "disable_aggregation": True}


def shard_plan(shard: ShardPlan, job_dir: str, run: dict[str, Any], model_type: list[str]) -> ShardPlan:
    """The commands of a shard's driver, from its benchmark's run keys (those a shard sets itself
    left out; policy wiring included, as every gym command of the benchmark reads it)."""
    common = flatten_overrides({k: v for k, v in run.items() if k not in SHARD_RUN_KEYS}, "run.")
    prepared_dir = f"{job_dir}/{contract.PREPARED_DATA_DIR}"
    shard_rollouts = f"{contract.shard_dir(shard.bench_dir, '*')}/{contract.ROLLOUTS_FILE}"
    limit = run.get("limit")
    return replace(
        shard,
        prepared_dir=prepared_dir,
        split=str(run.get("split") or ""),
        limit=int(limit) if limit not in (None, "", 0) else None,
        collate_argv=(
            "gym",
            "dataset",
            "collate",
            *model_type,
            *common,
            "+mode=train_preparation",
            "+should_download=true",
            f"+output_dirpath={prepared_dir}",
        ),
        env_start_argv=("gym", "env", "start", *model_type, *common),
        # gym eval aggregate takes no --model-type: the config it names is given as a path.
        aggregate_argv=(
            "gym",
            "eval",
            "aggregate",
            *_model_type_config(model_type),
            *common,
            f"+input_glob={shard_rollouts}",
            f"+output_jsonl_fpath={shard.bench_dir}/{contract.ROLLOUTS_FILE}",
        ),
    )


def _model_type_config(model_type: list[str]) -> list[str]:
    """``--model-type NAME[/FLAVOR]`` as the config path gym 0.7.0 makes of it, for gym commands
    that take only configs: ``responses_api_models/NAME/configs/FLAVOR.yaml`` (FLAVOR: NAME)."""
    if not model_type:
        return []
    name, _, flavor = model_type[1].partition("/")
    return [f"+config_paths=[responses_api_models/{name}/configs/{flavor or name}.yaml]"]
