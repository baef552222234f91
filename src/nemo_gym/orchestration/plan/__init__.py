"""Validated ``SubmitConfig`` -> ``RunPlan``: every decision about the jobs, as plain data.

Which node is a service's head, which nodes a step runs on, which argv each node's process gets,
how each service is health-checked, where the driver and the collector run, what the collector
scrapes, what the driver's environment is: all decided here, once, in Python. Rendering prints
these decisions and decides nothing. ``model`` holds the data; ``building.build_plan`` makes it
from the modules of each part (``layout``, ``services``, ``driver``, ``telemetry``, ``sharding``,
``exports``, ``jobs``); ``sharing`` makes a sweep's same deployments one.
"""

from nemo_gym.orchestration.plan.building import build_plan
from nemo_gym.orchestration.plan.model import JobPlan, RunPlan
from nemo_gym.orchestration.plan.sharing import deployment_key, share_deployments

__all__ = ["JobPlan", "RunPlan", "build_plan", "deployment_key", "share_deployments"]
