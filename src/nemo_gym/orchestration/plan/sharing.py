"""A sweep's runs whose shared deployments are the same, made one: the host's job runs them all."""

from __future__ import annotations

import json
import posixpath
from dataclasses import replace

from nemo_gym.orchestration.plan.model import JobPlan, RunPlan


def deployment_key(plan: RunPlan) -> str:
    """What a run's deployment is made of, paths aside: the services, the compute, the telemetry,
    where it is submitted and what it is given. Runs with the same key could share one."""
    config = plan.resolved_config
    made_of = {
        "services": config.get("services"),
        "compute": config.get("compute"),
        "otel": config.get("otel"),
        "at_once": plan.benchmarks_at_once,
        "given": [sorted(plan.secrets), sorted(plan.carried_env), plan.otel_token_env, plan.hostname, plan.runtime],
        # Its runs' directories side by side: each finds the shared job's beside its own.
        "where": posixpath.dirname(plan.run_dir),
    }
    return json.dumps(made_of, sort_keys=True, default=str)


def share_deployments(plans: list[RunPlan]) -> list[RunPlan]:
    """A sweep's runs whose shared deployments are the same (``deployment_key``: only driver or
    benchmark settings differ, a temperature, a prompt) as one: the first runs the shared job and
    its job runs every one of their benchmarks, each still in its own run's directory; the others
    queue nothing. The host's run counts the shared job's GPU-hours, the guests' none."""
    groups: dict[str, list[int]] = {}
    for i, plan in enumerate(plans):
        if plan.shared is not None and plan.resolved_config.get("job", {}).get("deployment") == "shared":
            groups.setdefault(deployment_key(plan), []).append(i)
    shared = list(plans)
    for members in groups.values():
        if len(members) < 2:
            continue
        host = plans[members[0]]
        assert host.shared is not None
        where = (host.run_id, host.shared.job_dir)
        guests: list[JobPlan] = []
        for i in members[1:]:
            jobs = tuple(counted_by_host(job) for job in plans[i].jobs)
            shared[i] = replace(plans[i], jobs=jobs, host=where)
            guests += jobs
        shared[members[0]] = replace(host, guests=tuple(guests))
    return shared


def counted_by_host(job: JobPlan) -> JobPlan:
    """A guest's benchmark: its exports count no GPU-hours (the host's run counts the shared job's)."""
    if job.export is None:
        return job
    return replace(job, export=replace(job.export, spec={**job.export.spec, "usage_dir": None}))
