"""The driver of a benchmark's job: where it runs, what it is given (its env, mounts, logs) and
what it runs (gym eval prepare and run, or the benchmark's own command)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.api import POLICY_RUN_KEYS, RUNTIME_ENV_PREFIX, BenchmarkRunConfig, DriverConfig
from nemo_gym.orchestration.overrides import flatten_overrides
from nemo_gym.orchestration.plan.inputs import RunInputs
from nemo_gym.orchestration.plan.layout import Layout
from nemo_gym.orchestration.plan.model import (
    DRIVER_STEP,
    DriverPlan,
    EnvVar,
    Launch,
    NodeSlice,
    OtelPlan,
    PortedArg,
    PortRef,
    ShardPlan,
)
from nemo_gym.orchestration.plan.ports import HEAD_SERVER, HEAD_SERVER_PORT
from nemo_gym.orchestration.plan.sharding import shard_plan, shard_run
from nemo_gym.orchestration.plan.telemetry import driver_telemetry_env

# What tells gym eval run to keep the rollouts on disk and generate only the pairs they lack: it
# dispatches the materialized inputs' pairs that rollouts.jsonl does not hold, appends their rows
# and aggregates over all of them. ``++`` sets it whether or not the run config did.
CONTINUE_FROM_DISK = "++resume_from_cache=true"


def driver_plan(
    run: RunInputs,
    benchmark: str,
    job_dir: str,
    otel: OtelPlan | None,
    shared_driver: bool,
    shard: ShardPlan | None,
    claimed: dict[str, PortRef] | None = None,
) -> tuple[DriverPlan, ShardPlan | None]:
    """The benchmark's driver, and its shard's commands once they are known (gym's from its run keys).
    ``claimed``: the ports the job claims at its start, by name (the policy's, gym's head server's)."""
    driver = run.config.driver
    bench = driver.benchmarks[benchmark]
    rollouts = f"{job_dir}/{contract.ROLLOUTS_FILE}"
    run_argv, continue_argv, shard = _gym_run(driver, bench, job_dir, rollouts, shard)
    run_argv, ported = _ported(driver, run_argv, claimed or {})
    if shard is not None and ported:
        # The merge's gym servers and aggregate run in this job too, after its gym eval run: on its ports.
        shard = replace(
            shard,
            env_start_argv=_without_ported(shard.env_start_argv, ported),
            aggregate_argv=_without_ported(shard.aggregate_argv, ported),
        )
    gym_telemetry = otel is not None and run.config.otel.gym_telemetry
    plan = DriverPlan(
        node=run.layout.driver_node,
        launch=_driver_launch(run.layout, driver, job_dir, shared_driver, shard),
        env=_driver_env(run, benchmark, job_dir, otel),
        prepare_argv=_prepare_argv(bench),
        run_argv=run_argv,
        gym_repo=driver.gym_install.repo if driver.gym_install else None,
        gym_ref=driver.gym_install.ref if driver.gym_install else None,
        rollouts_path=rollouts,
        command=bench.command,
        continue_argv=continue_argv,
        ported_argv=ported,
        gym_extras="telemetry" if gym_telemetry else "",
        policy_host_variable=runtime_variable(driver.policy_host),
    )
    return plan, shard


# gym's head server's port, and the policy's endpoint, as gym eval run is told them.
HEAD_PORT_OVERRIDE = "+head_server.port="
POLICY_URL_OVERRIDE = "+policy_base_url="


def _ported(
    driver: DriverConfig, run_argv: tuple[str, ...], claimed: dict[str, PortRef]
) -> tuple[tuple[str, ...], tuple[PortedArg, ...]]:
    """gym eval run's words without those that name a claimed port, and those words, each with its
    port as a reference: the policy's endpoint (as ``driver.policy_model`` wires it) and gym's head
    server (gym binds 11000 unless told otherwise)."""
    if not run_argv or not claimed:
        return run_argv, ()
    ported: list[PortedArg] = []
    head = next((ref for name, ref in claimed.items() if name == HEAD_SERVER), None)
    if head is not None:
        ported.append(PortedArg(HEAD_PORT_OVERRIDE, head))
    policy = claimed.get(driver.policy_model or "")
    if policy is not None:
        ported.append(PortedArg(f'{POLICY_URL_OVERRIDE}"http://{driver.policy_host}:', policy, '/v1"'))
    return _without_ported(run_argv, ported), tuple(ported)


def _without_ported(argv: tuple[str, ...], ported: list[PortedArg] | tuple[PortedArg, ...]) -> tuple[str, ...]:
    """``argv`` without the words that ``ported`` says again with a claimed port."""
    dropped = tuple(p.before.split("=", 1)[0] + "=" for p in ported)
    return tuple(arg for arg in argv if not arg.startswith(dropped))


def head_server_port(bench: BenchmarkRunConfig) -> int:
    """The head server's port a benchmark's run config asks for, else gym's default."""
    head = bench.run.get("head_server")
    port = head.get("port") if isinstance(head, dict) else None
    return port if isinstance(port, int) and not isinstance(port, bool) else HEAD_SERVER_PORT


def _prepare_argv(bench: BenchmarkRunConfig) -> tuple[str, ...] | None:
    return ("gym", "eval", "prepare", *flatten_overrides(bench.prepare, "prepare.")) if bench.prepare else None


def _gym_run(
    driver: DriverConfig, bench: BenchmarkRunConfig, job_dir: str, rollouts: str, shard: ShardPlan | None
) -> tuple[tuple[str, ...], tuple[str, ...], ShardPlan | None]:
    """gym eval run's argv, what it is given to continue from disk, and the shard's commands; no
    argv for a command benchmark, which runs its own script."""
    if bench.command is not None:
        return (), (), shard
    model_type = ["--model-type", driver.policy_model_type] if driver.policy_model and driver.policy_model_type else []
    run = bench.run
    if bench.resume_config is not None and "resume_from_cache" not in run:
        # Every job of a resumable chain continues from the rollouts on disk; on the first job
        # there are none yet, which gym treats as a fresh start.
        run = {**run, "resume_from_cache": True}
    if shard is not None:
        shard = shard_plan(shard, job_dir, run, model_type)
        run = shard_run(run)
    run_argv = ("gym", "eval", "run", f"+output_jsonl_fpath={rollouts}", *model_type, *flatten_overrides(run, "run."))
    continue_argv = () if run.get("resume_from_cache") is True else (CONTINUE_FROM_DISK,)
    return run_argv, continue_argv, shard


def _driver_launch(
    layout: Layout, driver: DriverConfig, job_dir: str, shared_driver: bool, shard: ShardPlan | None
) -> Launch:
    mounts = tuple(driver.mounts) + (f"{job_dir}:{job_dir}",)
    if shard is not None:
        # The shard's driver reads its siblings' rollouts and writes the merged ones beside them.
        mounts += (f"{shard.bench_dir}:{shard.bench_dir}",)
    # A shared deployment's job runs every benchmark's driver from its own directory: the
    # drivers' logs go to their benchmarks' directories.
    log_dir = f"{job_dir}/{contract.LOGS_DIR}" if shared_driver else contract.LOGS_DIR
    nodes = NodeSlice(layout.driver_node, 1)
    return Launch(
        DRIVER_STEP, job_dir, nodes, driver.container, mounts, False, log_dir, component=layout.component_of(nodes)
    )


def _driver_env(run: RunInputs, benchmark: str, job_dir: str, otel: OtelPlan | None) -> tuple[EnvVar, ...]:
    """The driver's env in ``DriverPlan.env``'s order, each part winning over those before it."""
    driver = run.config.driver
    env = run.env("driver", driver)
    if otel is not None:
        own = {var.key for var in env}
        told_by_otel = driver_telemetry_env(
            run.config.otel, run.run_id, benchmark, run.compute_name, otel.otlp_http_port
        )
        env = tuple(var for var in told_by_otel if var.key not in own) + env
    bench = driver.benchmarks[benchmark]
    if bench.command is not None:
        told = command_env(job_dir, bench.run)
        env = tuple(var for var in env if var.key not in told) + tuple(EnvVar(k, "lit", v) for k, v in told.items())
    return env


def command_env(job_dir: str, run: dict[str, Any]) -> dict[str, str]:
    """What a command benchmark's script is told: its directory and the policy's endpoint."""
    env = {"NEMO_GYM_BENCH_DIR": job_dir}
    for key in POLICY_RUN_KEYS:
        if key in run:
            env[f"NEMO_GYM_{key.upper()}"] = str(run[key])
    return env


def runtime_variable(host: str) -> str | None:
    """``runtime:VAR`` -> VAR: a host known only on the node, read there."""
    return host[len(RUNTIME_ENV_PREFIX) :] if host.startswith(RUNTIME_ENV_PREFIX) else None
