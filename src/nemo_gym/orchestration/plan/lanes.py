"""Lanes of checkpoints (``job.deployment: reload``): a checkpoint sweep's runs served by few jobs.

Runs whose deployments differ only in the policy's checkpoint (``weights_key``) are put in step
order and dealt round-robin into lanes, as many as ``job.max_concurrent`` (one when unset): each
lane is one job, its first run's shared job, which serves its runs in turn. The others queue
nothing, like a shared deployment's guests (``sharing``).

A warm lane starts the deployment once and has the policy's server reload each run's weights in
place (``weights.py``). Where an in-place reload cannot be trusted (``why_not_in_place``: not
one vLLM server, no one served name), a restart lane stops the deployment after each run and
starts the next run's own (its steps, named for the turn), in the same allocation: it saves the
queue waits and submissions, not the starts. Where neither can be had (no policy service, a
backend that cannot start a job's services again), each run keeps a deployment of its own. The
dry run says which, and why.
"""

from __future__ import annotations

import posixpath
from dataclasses import replace

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.backends import backend_named
from nemo_gym.orchestration.feeding import dealt
from nemo_gym.orchestration.plan.model import (
    EnvVar,
    InPlace,
    JobPlan,
    PlainStep,
    ReloadPlan,
    RunPlan,
    Step,
    WeightsTurn,
)
from nemo_gym.orchestration.plan.services import SERVED_NAME_FLAG
from nemo_gym.orchestration.plan.sharing import counted_by_host, deployment_key
from nemo_gym.orchestration.reload_guard import TOKEN_ENV
from nemo_gym.orchestration.watch_state import step_of

GUARD = "nemo_gym.orchestration.reload_guard.ReloadGuard"  # what vLLM's --middleware imports


def reloading(plan: RunPlan) -> bool:
    return plan.shared is not None and plan.resolved_config.get("job", {}).get("deployment") == "reload"


def policy_of(plan: RunPlan) -> tuple[str, dict] | None:
    """The policy service's name and resolved config, when the driver names one."""
    name = plan.resolved_config.get("driver", {}).get("policy_model")
    service = plan.resolved_config.get("services", {}).get(name) if name else None
    return (name, service) if isinstance(service, dict) else None


def weights_key(plan: RunPlan) -> str:
    """``deployment_key`` with the policy's checkpoint left out: runs with the same key could
    share one server whose weights are reloaded between them."""
    policy = policy_of(plan)
    if policy is None:
        return deployment_key(plan)
    name, service = policy
    config = dict(plan.resolved_config)
    config["services"] = {**config["services"], name: _without(service, service.get("model"))}
    return deployment_key(replace(plan, resolved_config=config))


def _without(value: object, model: object) -> object:
    """``value`` with its ``model`` keys that name the checkpoint left out, wherever the service's
    config repeats it (a prefill/decode pair's tiers inherit it). Only those: a served name that
    is the checkpoint's path still tells the runs apart."""
    if isinstance(value, dict):
        return {k: None if k == "model" and v == model else _without(v, model) for k, v in value.items()}
    if isinstance(value, list):
        return [_without(v, model) for v in value]
    return value


def why_no_lane(plan: RunPlan) -> str | None:
    """Why this run cannot be served in a lane at all (each keeps a deployment of its own), or None."""
    if policy_of(plan) is None:
        return "driver.policy_model names no model service whose weights would change"
    if not backend_named(plan.backend).restarts_services and why_not_in_place(plan) is not None:
        return (
            f"{why_not_in_place(plan)}, and the {plan.backend} backend cannot start a job's services again "
            f"(each is a container of its own) for a restart lane"
        )
    return None


def why_not_in_place(plan: RunPlan) -> str | None:
    """Why this run's policy server cannot have its weights switched in place, or None."""
    policy = policy_of(plan)
    assert policy is not None
    name, service = policy
    if service.get("type") != "vllm":
        return f"services.{name} is {service.get('type')}: only a vLLM server reloads its weights in place (yet)"
    if not service.get("served_model_name") and SERVED_NAME_FLAG not in str(service.get("extra_args") or ""):
        return (
            f"services.{name}.served_model_name is not set, so each checkpoint is served under its own path; "
            f"set one name for every checkpoint"
        )
    assert plan.shared is not None
    steps = [step for step in plan.shared.steps if step.service == name]
    if (
        len(steps) != 1
        or type(steps[0]) is not PlainStep
        or steps[0].nodes.count != 1
        or "--data-parallel-size" in steps[0].argv
    ):
        return f"services.{name} is not one vLLM server on one node (instances, data parallel, Ray or a gateway): a reload reaches one server only (yet)"
    if any(var.key in ("PYTHONPATH", TOKEN_ENV, "VLLM_SERVER_DEV_MODE") for var in steps[0].env):
        return f"services.{name}.env sets PYTHONPATH or VLLM_SERVER_DEV_MODE, which the reload's guard sets"
    return None


def _step_order(plan: RunPlan) -> tuple[bool, int, str]:
    """Step order (job.training_step, else the step the checkpoint's name says); unnumbered last."""
    model = plan.model or ""
    step = plan.resolved_config.get("job", {}).get("training_step")
    if step is None:
        step = step_of(posixpath.basename(model.rstrip("/")))
    return step is None, step or 0, model


def warm_lanes(plans: list[RunPlan]) -> tuple[list[RunPlan], list[str]]:
    """The sweep's reload runs made into lanes; with one line each on what was made, or why not."""
    groups: dict[str, list[int]] = {}
    for i, plan in enumerate(plans):
        if reloading(plan):
            groups.setdefault(weights_key(plan), []).append(i)
    out, notes = list(plans), []
    for members in groups.values():
        cannot = why_no_lane(plans[members[0]])
        if cannot is not None:
            notes.append(f"job.deployment=reload: {len(members)} run(s) each start a deployment of their own: {cannot}")
            continue
        why = why_not_in_place(plans[members[0]])
        ordered = sorted(members, key=lambda i: _step_order(plans[i]))
        wanted = plans[ordered[0]].resolved_config.get("job", {}).get("max_concurrent")
        lanes = dealt(len(ordered), min(wanted or 1, len(ordered)))
        for lane in lanes.lanes:
            for i, made in zip((ordered[j] for j in lane), _lane([plans[ordered[j]] for j in lane], why is None)):
                out[i] = made
        notes.append(_lanes_note(len(ordered), len(lanes.lanes), why))
    return out, notes


def _lanes_note(runs: int, lanes: int, why_restart: str | None) -> str:
    how = "(one job each that starts the deployment once and reloads the weights between runs"
    kind = "warm"
    if why_restart is not None:
        kind = "restart"
        how = (
            "(one job each, no queue wait between runs, that starts the deployment anew for each checkpoint: "
            f"{why_restart}"
        )
    return f"job.deployment=reload: {runs} checkpoint run(s) in {lanes} {kind} lane(s) {how}; job.max_concurrent sets how many lanes)"


def _lane(members: list[RunPlan], in_place: bool) -> list[RunPlan]:
    """One lane's runs: the first hosts the job that serves them all, in this order."""
    host = members[0]
    assert host.shared is not None
    where = (host.run_id, host.shared.job_dir)
    made: list[RunPlan] = []
    guests: list[JobPlan] = []
    for member in members[1:]:
        jobs = tuple(counted_by_host(job) for job in member.jobs)
        made.append(replace(member, jobs=jobs, host=where))
        guests += jobs
    if in_place:
        turns = tuple(WeightsTurn(m.run_id, m.model or "") for m in members)
        shared, reload = _guarded(host.shared, host, turns)
        return [replace(host, shared=shared, guests=tuple(guests), reload=reload), *made]
    turns = tuple(
        WeightsTurn(m.run_id, m.model or "", _as_turn(m, host.shared.job_dir, turn) if turn else ())
        for turn, m in enumerate(members)
    )
    policy = policy_of(host)
    assert policy is not None
    reload = ReloadPlan(service=policy[0], turns=turns)
    return [replace(host, guests=tuple(guests), reload=reload), *made]


def _as_turn(member: RunPlan, job_dir: str, turn: int) -> tuple[Step, ...]:
    """A restart lane's run's own deployment (its steps as its own shared job would run them),
    started by the lane's job in ``job_dir``: each step named for the turn, its script and log there.
    Its ports are the job's (the same services claim the same ports, once)."""
    assert member.shared is not None
    return tuple(
        replace(
            step,
            name=contract.turn_step(step.name, turn),
            launch=replace(step.launch, step=contract.turn_step(step.name, turn), job_dir=job_dir),
        )
        for step in member.shared.steps
    )


def _guarded(job: JobPlan, host: RunPlan, turns: tuple[WeightsTurn, ...]) -> tuple[JobPlan, ReloadPlan]:
    """The host's shared job with its policy server's development endpoints opened to the job alone."""
    policy = policy_of(host)
    assert policy is not None
    name, service = policy
    step = next(step for step in job.steps if step.service == name)
    env = (
        EnvVar("VLLM_SERVER_DEV_MODE", "lit", "1"),
        EnvVar(TOKEN_ENV, "lit", f"{job.job_dir}/{contract.RELOAD_TOKEN_FILE}"),
        EnvVar("PYTHONPATH", "lit", f"{job.job_dir}/{contract.SHIPPED_DIR}"),
    )
    guarded = replace(step, env=step.env + env, argv=step.argv + ("--middleware", GUARD))
    steps = tuple(guarded if s is step else s for s in job.steps)
    port = step.claimed_port if step.claimed_port is not None else int(service["port"])
    reload = ReloadPlan(service=name, turns=turns, in_place=InPlace(node=step.nodes.start, port=port))
    return replace(job, steps=steps), reload
