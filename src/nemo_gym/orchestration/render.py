"""``RunPlan`` -> the staged run directory: job scripts, step scripts and the resolved config.

Pure: returns file contents; nothing is written or launched here. Templates are Jinja2 with
undefined variables as errors; every user string is shell-quoted here, in Python, never by hand
in a template.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Literal

from nemo_gym.orchestration.api import SubmitConfig
from nemo_gym.orchestration.plan import RESUME_CHAIN_LIMIT, DriverPlan, EnvVar, JobPlan, RunPlan, Step, shell_var
from nemo_gym.orchestration.resolved import resolved_config_dict
from nemo_gym.orchestration.shellquote import bash_argv, bash_quote
from nemo_gym.orchestration.yamlio import dump_yaml

Launcher = Literal["slurm", "local"]


@dataclass(frozen=True)
class StagedFile:
    content: str
    mode: int = 0o644


@dataclass(frozen=True)
class StagedRun:
    """Files relative to the run directory, exactly as they are uploaded."""

    plan: RunPlan
    files: dict[str, StagedFile]
    otel_token_env: str | None = None  # the variable whose value the submission must export

    def job_script(self, benchmark: str) -> str:
        return self.files[f"{benchmark}/job.sh"].content


def _export_env(var: EnvVar) -> str:
    if var.kind == "lit":
        return f"export {var.key}={bash_quote(var.value)}"
    # runtime: read where the step runs; host: carried by the submission's environment.
    return f'export {var.key}="${{{var.value}-}}"'


def _bytecode_cache(jinja2: Any) -> Any:
    """Compiled templates kept between runs: compiling them is most of a small render's time."""
    import os
    import tempfile

    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    directory = os.path.join(base, "gym-orchestration", "templates")
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError:
        directory = tempfile.gettempdir()
    return jinja2.FileSystemBytecodeCache(directory)


@lru_cache(maxsize=1)
def _environment() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("nemo_gym.orchestration", "templates"),
        bytecode_cache=_bytecode_cache(jinja2),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
        # Bash's ${#array[@]} would open a Jinja comment; these templates use no comments.
        comment_start_string="<#jinja#",
        comment_end_string="#jinja#>",
    )
    env.filters["q"] = lambda v: bash_quote(str(v))
    env.filters["argv"] = bash_argv
    env.filters["export_env"] = _export_env
    return env


def _apptainer_image(image: str) -> str:
    if image.endswith(".sif") or image.startswith("/") or "://" in image:
        return image
    return "docker://" + image.replace("#", "/")


def _step_launch(
    launcher: Launcher, runtime: str, job: JobPlan, name: str, nodes_start: int, nodes_count: int,
    container: str | None, mounts: tuple[str, ...], gpus: bool, log_dir: str = "logs",
) -> str:  # fmt: skip
    script = f"{job.job_dir}/steps/{name}.sh"
    if launcher == "local":
        # Its own process group, so the job can stop everything the step started.
        return f'setsid bash {bash_quote(script)} >"{log_dir}/{name}-$GYM_JOB_ID.log" 2>&1'
    log = f"{log_dir}/{name}-%j.log" if nodes_count == 1 else f"{log_dir}/{name}-%j-%N.log"
    # One task per node, whatever ntasks_per_node the allocation has: each step runs once a node.
    parts = [
        "srun --overlap",
        f"--nodes={nodes_count} --ntasks={nodes_count} --ntasks-per-node=1",
        f'--nodelist="$(gym_node_list {nodes_start} {nodes_count})"',
        f"--output={bash_quote(log)}",
    ]
    all_mounts = (f"{job.job_dir}:{job.job_dir}", *[m for m in mounts if m != f"{job.job_dir}:{job.job_dir}"])
    command = f"bash {bash_quote(script)}"
    if runtime == "pyxis" and container:
        parts += [
            f"--container-image={bash_quote(container)}",
            f"--container-mounts={bash_quote(','.join(all_mounts))}",
            "--no-container-mount-home",
            f"--container-workdir={bash_quote(job.job_dir)}",
        ]
    elif runtime == "apptainer" and container:
        binds = ",".join(all_mounts)
        nv = " --nv" if gpus else ""
        command = f"apptainer exec{nv} --bind {bash_quote(binds)} {bash_quote(_apptainer_image(container))} {command}"
    return " ".join(parts) + " " + command


def _step_comment(step: Step) -> str:
    what = {
        "plain": "one process",
        "vllm-dp": f"vLLM data parallel, {step.dp_local_size} rank(s) a node",
        "vllm-ray": "one vLLM instance across nodes on a Ray cluster",
        "vllm-gateway": f"{step.instances} vLLM replicas behind the Ray gateway",
        "ray-head": "Ray head",
        "ray-worker": "Ray workers",
    }[step.mode]
    return f"service {step.service}, step {step.name}: {what}, nodes {step.nodes.start}..{step.nodes.start + step.nodes.count - 1}"


def _otel_context(config: SubmitConfig, plan: RunPlan, job: JobPlan, launcher: Launcher) -> dict | None:
    if not config.otel.enabled:
        return None
    from nemo_gym.orchestration.otel import collector_config_path

    otel = config.otel
    launch = _step_launch(
        launcher, plan.runtime, job, "otel_collector", job.driver.node, 1, otel.container, (), False
    )
    return {
        "launch": launch,
        "node_count": job.node_count,
        "token_env": otel.token_env,
        "timeout": otel.health_check_timeout_seconds,
        "host": "localhost" if launcher == "local" else f"$(gym_node_name {job.driver.node})",
        "argv": [otel.binary, "--config", collector_config_path(job)],
    }


def _shared_context(plan: RunPlan, launcher: Launcher, gpus: bool) -> dict | None:
    if plan.shared is None:
        return None
    drivers = []
    for bench in plan.jobs:
        d = bench.driver
        launch = _step_launch(
            launcher, plan.runtime, bench, "driver", d.node, 1, d.container, d.mounts, False, f"{bench.job_dir}/logs"
        )
        drivers.append({"benchmark": bench.benchmark, "dir": bench.job_dir, "launch": launch})
    return {"drivers": drivers, "at_once": plan.benchmarks_at_once}


def _driver_file(config: SubmitConfig, plan: RunPlan, job: JobPlan) -> StagedFile:
    common = {"run_id": plan.run_id, "job": job, "launcher": plan.launcher, "runtime": plan.runtime}
    driver = _with_otel_env(config, plan, job, job.driver)
    return StagedFile(_environment().get_template("driver.sh.j2").render(**common, driver=driver), 0o755)


def render_job(
    config: SubmitConfig, plan: RunPlan, job: JobPlan, launcher: Launcher, gpus: bool
) -> dict[str, StagedFile]:
    env = _environment()
    otel = _otel_context(config, plan, job, launcher)
    service_steps: dict[str, list[str]] = {}
    steps_ctx = []
    health_checks = []
    for step in job.steps:
        service_steps.setdefault(step.service, []).append(step.name)
        launch = _step_launch(
            launcher, plan.runtime, job, step.name, step.nodes.start, step.nodes.count, step.container, step.mounts, gpus
        )
        steps_ctx.append({"name": step.name, "launch": launch, "comment": _step_comment(step)})
        if step.health is not None:
            host = "localhost" if launcher == "local" else f"$(gym_node_name {step.health.node})"
            health_checks.append(
                {
                    "kind": step.health.kind,
                    "service": step.service,
                    "step": step.name,
                    "host": host,
                    "port": step.health.port,
                    "path": step.health.path,
                    "timeout": step.health.timeout_seconds,
                }
            )
    driver: DriverPlan = job.driver
    driver_launch = _step_launch(
        launcher, plan.runtime, job, "driver", driver.node, 1, driver.container, driver.mounts, False
    )
    ray_addresses = [
        {"service": s, "node": node, "port": port, "variable": f"GYM_RAY_ADDRESS_{shell_var(s)}"}
        for s, node, port in job.ray_addresses
    ]
    common = {"run_id": plan.run_id, "job": job, "launcher": launcher, "runtime": plan.runtime}
    files = {
        "job.sh": StagedFile(
            env.get_template("job.sh.j2").render(
                **common,
                service_steps=service_steps,
                steps=steps_ctx,
                health_checks=health_checks,
                driver={"launch": driver_launch},
                ray_addresses=ray_addresses,
                otel=otel,
                shared=_shared_context(plan, launcher, gpus) if job is plan.shared else None,
            ),
            0o755,
        ),
        "steps/lib.sh": _library(plan.run_id),
    }
    if job is not plan.shared:
        files["steps/driver.sh"] = _driver_file(config, plan, job)
    if job.resume is not None:
        files["steps/resume.sh"] = StagedFile(
            env.get_template("resume.sh.j2").render(run_id=plan.run_id, resume=job.resume, chain_limit=RESUME_CHAIN_LIMIT)
        )
    if otel is not None:
        from nemo_gym.orchestration.otel import render_collector_config

        files["otel/collector.yaml"] = StagedFile(render_collector_config(config, plan, job))
        files["steps/otel_collector.sh"] = StagedFile(
            env.get_template("collector.sh.j2").render(node=job.driver.node, argv=otel["argv"]), 0o755
        )
    if any(step.mode == "vllm-gateway" for step in job.steps):
        from nemo_gym.orchestration.gateway import SCRIPT_NAME, script_text

        files[f"steps/{SCRIPT_NAME}"] = StagedFile(script_text(), 0o644)
    for step in job.steps:
        ctx_step = {
            **step.__dict__,
            "ray_address_variable": f"GYM_RAY_ADDRESS_{shell_var(step.service)}",
        }
        files[f"steps/{step.name}.sh"] = StagedFile(
            env.get_template("step.sh.j2").render(**common, step=_Obj(ctx_step)), 0o755
        )
    return files


@lru_cache(maxsize=4)
def _library(run_id: str) -> StagedFile:
    """The shell library is the same for every job of a run: render it once."""
    return StagedFile(_environment().get_template("lib.sh.j2").render(run_id=run_id))


def _with_otel_env(config: SubmitConfig, plan: RunPlan, job: JobPlan, driver: DriverPlan) -> DriverPlan:
    """The driver sends its own telemetry to the collector beside it; driver.env still wins."""
    if not config.otel.enabled:
        return driver
    from nemo_gym.orchestration.otel import driver_otel_env

    own = {var.key for var in driver.env}
    extra = tuple(EnvVar(k, "lit", v) for k, v in driver_otel_env(config, plan, job).items() if k not in own)
    return replace(driver, env=extra + driver.env)


class _Obj(dict):
    """Attribute access for template contexts built from dataclasses."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def render_run(config: SubmitConfig, plan: RunPlan) -> StagedRun:
    compute = next(iter(config.compute.values()))
    launcher = plan.launcher
    gpus = any(p.gpus_per_node for p in compute.node_pools.values())
    files: dict[str, StagedFile] = {}
    for job in plan.submitted_jobs:
        for rel, staged in render_job(config, plan, job, launcher, gpus).items():
            files[f"{job.benchmark}/{rel}"] = staged
    if plan.shared is not None:
        for job in plan.jobs:  # each benchmark's driver, run by the shared job
            files[f"{job.benchmark}/steps/driver.sh"] = _driver_file(config, plan, job)
            files[f"{job.benchmark}/steps/lib.sh"] = _library(plan.run_id)
    if launcher == "local":
        files["run-local.sh"] = StagedFile(_environment().get_template("run-local.sh.j2").render(plan=plan), 0o755)
    files["resolved-config.yaml"] = StagedFile(
        dump_yaml(resolved_config_dict(config)), 0o600
    )
    return StagedRun(plan=plan, files=files, otel_token_env=config.otel.token_env if config.otel.enabled else None)
