"""The submit config: pydantic models, ``resolve_env_dict`` and ``effective_ray_serve``.

This package is the only place where rules about the config live. Everything downstream (plan,
render, launch) trusts a validated ``SubmitConfig``. It is the spec's published API: every name
is imported from here (``nemo_gym.orchestration.api``), never from the module that defines it,
which may change.

Error messages start with the YAML path of the offending value and end with what to do, because
the CLI prints them as they are, one line per problem.
"""

from __future__ import annotations

# Every name the single module this was had: those of __all__ (what a star import takes), and, as
# ``X as X``, those outside it that the rest of the package and the spec's tests import by name.
from nemo_gym.orchestration.api.compute import (
    AnyComputeConfig,
    BaseComputeConfig,
    ComputeConfig,
    KubernetesComputeConfig,
    LocalComputeConfig,
    NodePool,
    SlurmComputeConfig,
)
from nemo_gym.orchestration.api.driver import POLICY_HOST as POLICY_HOST
from nemo_gym.orchestration.api.driver import UNCHECKED_SECTIONS as UNCHECKED_SECTIONS
from nemo_gym.orchestration.api.driver import BenchmarkRunConfig, DriverConfig, GymInstallConfig, ResumeConfig
from nemo_gym.orchestration.api.driver import Resumable as Resumable
from nemo_gym.orchestration.api.env import _ENV_VAR_NAME_RE as _ENV_VAR_NAME_RE
from nemo_gym.orchestration.api.env import CREDENTIAL_SECRETS as CREDENTIAL_SECRETS
from nemo_gym.orchestration.api.env import HOST_ENV_PREFIX as HOST_ENV_PREFIX
from nemo_gym.orchestration.api.env import LITERAL_ENV_PREFIX as LITERAL_ENV_PREFIX
from nemo_gym.orchestration.api.env import RUNTIME_ENV_PREFIX, resolve_env_dict
from nemo_gym.orchestration.api.env import EnvSource as EnvSource
from nemo_gym.orchestration.api.env import env_sources as env_sources
from nemo_gym.orchestration.api.env import env_sources_of as env_sources_of
from nemo_gym.orchestration.api.env import is_carried_secret as is_carried_secret
from nemo_gym.orchestration.api.job import JobConfig, OtelConfig
from nemo_gym.orchestration.api.services import DATA_PARALLEL_RPC_PORT as DATA_PARALLEL_RPC_PORT
from nemo_gym.orchestration.api.services import PD_SERVICE_ONLY as PD_SERVICE_ONLY
from nemo_gym.orchestration.api.services import PD_TIER_IDENTITY as PD_TIER_IDENTITY
from nemo_gym.orchestration.api.services import PD_TIERS as PD_TIERS
from nemo_gym.orchestration.api.services import (
    BaseModelServiceConfig,
    BaseServiceConfig,
    HealthCheckConfig,
    RayServiceConfig,
    ServiceConfig,
    VllmPDServiceConfig,
    VllmPDTierConfig,
    VllmServiceConfig,
    effective_ray_serve,
)
from nemo_gym.orchestration.api.services import PDTier as PDTier
from nemo_gym.orchestration.api.strict import _StrictModel as _StrictModel
from nemo_gym.orchestration.api.submit import POLICY_API_KEY as POLICY_API_KEY
from nemo_gym.orchestration.api.submit import POLICY_RUN_KEYS as POLICY_RUN_KEYS
from nemo_gym.orchestration.api.submit import SubmitConfig

__all__ = [
    "RUNTIME_ENV_PREFIX",
    "BaseComputeConfig",
    "BaseModelServiceConfig",
    "BaseServiceConfig",
    "BenchmarkRunConfig",
    "ResumeConfig",
    "AnyComputeConfig",
    "ComputeConfig",
    "DriverConfig",
    "GymInstallConfig",
    "HealthCheckConfig",
    "JobConfig",
    "KubernetesComputeConfig",
    "LocalComputeConfig",
    "NodePool",
    "OtelConfig",
    "RayServiceConfig",
    "ServiceConfig",
    "SlurmComputeConfig",
    "SubmitConfig",
    "VllmPDServiceConfig",
    "VllmPDTierConfig",
    "VllmServiceConfig",
    "effective_ray_serve",
    "resolve_env_dict",
]
