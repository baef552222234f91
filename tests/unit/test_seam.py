"""The scheduler seam speaks no Slurm outside the Slurm backend.

Every Slurm command, directive and variable is spelled in the Slurm backend's own files
(``backends/slurm*.py``: the backend, its node module and its rules) and templates
(``templates/backend-slurm*.j2``, ``templates/slurm*.j2``); every other module and template of the package — the seam
(``backends/base.py``) and the local backend included — is scheduler-neutral. The plain word "Slurm" in
prose is allowed: it names what the backend runs on, not how it is driven.
"""

from __future__ import annotations

import os
import re
import subprocess
import warnings
from pathlib import Path

import jinja2
import pytest
from render_helpers import golden_record, submit_side_scripts

import nemo_gym.orchestration
from nemo_gym.orchestration import backends, templating
from nemo_gym.orchestration.api import SubmitConfig
from nemo_gym.orchestration.backends import Backend
from nemo_gym.orchestration.library import prepare
from nemo_gym.orchestration.observe import parse_probe, statuses_from
from nemo_gym.orchestration.validate import validate_config

PACKAGE = Path(nemo_gym.orchestration.__file__).parent
# Slurm's commands, its batch-script directives and states, and its environment variables
# (SLURM_JOB_ID, SLURMD_NODENAME, ...).
SLURM_WORDS = re.compile(r"PENDING|sbatch|scancel|squeue|scontrol|sacct|SBATCH|hetjob|SLURM[A-Z]*_\w*")


def is_the_slurm_backends(path: Path) -> bool:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] in ("backends", "templates") and path.name.startswith(("slurm", "backend-slurm"))


def neutral_files(root: Path = PACKAGE) -> list[Path]:
    """Every module and template of the package outside the Slurm backend's own files."""
    files = sorted([*root.rglob("*.py"), *root.rglob("*.j2")])
    return [path for path in files if not is_the_slurm_backends(path)]


def slurm_words_in(paths: list[Path], root: Path = PACKAGE.parent) -> list[str]:
    """``file:line: word`` (the file relative to ``root``) for every Slurm word in ``paths``."""
    found = []
    for path in paths:
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            for match in SLURM_WORDS.finditer(line):
                found.append(f"{path.relative_to(root)}:{number}: {match.group()}")
    return found


def test_no_slurm_word_outside_the_slurm_backend() -> None:
    found = slurm_words_in(neutral_files())
    assert not found, "Slurm words outside backends/ and templates/(backend-)slurm*.j2:\n" + "\n".join(found)


def test_the_scan_sees_the_neutral_modules_and_templates() -> None:
    """The scan is only as good as its file list: the shared modules and templates are in it, the
    Slurm backend's files are not."""
    rels = {str(path.relative_to(PACKAGE)) for path in neutral_files()}
    assert {
        "api/compute.py",
        "api/submit.py",
        "contract.py",
        "resume.py",
        "observe/folding.py",
        "observe/probe.py",
        "verbs/cancel/command.py",
        "templates/job.sh.j2",
        "templates/lib.sh.j2",
        "templates/probe.sh.j2",
        "templates/backend-local.sh.j2",
        "backends/base.py",
        "backends/local.py",
        "backends/__init__.py",
    } <= rels
    assert (
        not {"backends/slurm.py", "backends/slurm_node.py", "backends/slurm_rules.py", "templates/backend-slurm.sh.j2"}
        & rels
    )


def test_the_scan_names_a_slurm_word_by_file_and_line(tmp_path: Path) -> None:
    """A Slurm word put back into a neutral module fails the scan, named by file and line."""
    lines = (PACKAGE / "observe" / "folding.py").read_text().splitlines()
    lines.insert(2, 'said = "sbatch refused"')
    copy = tmp_path / "folding.py"
    copy.write_text("\n".join(lines))
    assert slurm_words_in([copy], root=tmp_path) == ["folding.py:3: sbatch"]


# Kubernetes' client and the keys of its objects: only its backend's files speak them.
KUBERNETES_WORDS = re.compile(
    r"kubectl|initContainers|batch/v1|nvidia\.com/gpu|KubernetesBackend|KubernetesComputeConfig"
)
# Where they may stand besides: the compute model (api/compute.py, the config spec, and the api package that
# publishes it) and the registry's one line.
KUBERNETES_ALLOWED = {
    "api/compute.py": {"KubernetesComputeConfig"},
    "api/__init__.py": {"KubernetesComputeConfig"},
    "backends/__init__.py": {"KubernetesBackend"},
}


def test_no_kubernetes_word_outside_the_kubernetes_backend() -> None:
    """No `if kubernetes` elsewhere: outside backends/kubernetes*.py and its template, the compute
    model in api/compute.py and the registry line are the only places that name it."""
    found = []
    for path in sorted([*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.j2")]):
        rel = str(path.relative_to(PACKAGE))
        if rel.startswith(("backends/kubernetes", "templates/backend-kubernetes")):
            continue
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            for match in KUBERNETES_WORDS.finditer(line):
                if match.group() not in KUBERNETES_ALLOWED.get(rel, set()):
                    found.append(f"{rel}:{number}: {match.group()}")
    assert not found, "Kubernetes words outside its backend:\n" + "\n".join(found)
    # The scan sees its words where they are.
    backend = "".join((PACKAGE / "backends" / name).read_text() for name in ("kubernetes.py", "kubernetes_manifest.py"))
    assert {"kubectl", "initContainers", "batch/v1", "nvidia.com/gpu"} <= set(KUBERNETES_WORDS.findall(backend))


# -- a third backend is a module, its template and one registry line ---------------------------------

FAKES = Path(__file__).resolve().parents[1] / "fakes"
TOYQ = "#!/bin/bash\ncase $1 in show) echo waiting ;; submit) echo toy-7 ;; kill) exit 0 ;; esac\n"


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Backend:
    """The toy backend (tests/fakes/toy_backend.py) registered by its one line; its template is
    found beside it (a backend of the package keeps it in templates/), and a fake ``toyq`` is on PATH."""
    monkeypatch.setitem(backends._REGISTRY, "toy", "fakes.toy_backend:ToyBackend")
    environment = templating._environment()
    loader = jinja2.ChoiceLoader([environment.loader, jinja2.FileSystemLoader(FAKES / "templates")])
    monkeypatch.setattr(environment, "loader", loader)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "toyq").write_text(TOYQ)
    (tmp_path / "bin" / "toyq").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    return backends.backend_named("toy")


def toy_config(output_path: Path) -> SubmitConfig:
    """A local config run by the toy backend: the compute models are the spec's (api/compute.py), so a
    new backend's config type is the one thing it adds outside its own files."""
    data = {
        "services": {"policy": {"type": "vllm", "container": "c", "model": "/models/tiny"}},
        "compute": {"here": {"type": "local"}},
        "driver": {"policy_model": "policy", "benchmarks": {"first": {}}},
        "job": {"output_path": str(output_path)},
        "otel": {"enabled": False},
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config, _ = validate_config(data)
    config.compute["here"] = config.compute["here"].model_copy(update={"type": "toy"})
    return config


def test_a_third_backend_renders_dry_runs_and_reads_its_scheduler(toy: Backend, tmp_path: Path) -> None:
    with warnings.catch_warnings():  # pydantic: the resolved config's compute says type toy
        warnings.simplefilter("ignore")
        [run] = prepare(toy_config(tmp_path / "runs")).runs  # what --dry-run prints
    staged = run.staged
    assert staged.plan.backend == "toy"
    job = staged.job_script("first")
    assert job.startswith(f"#!/bin/bash\n#TOYQ name=gym-first\n#TOYQ dir={staged.plan.run_dir}/first\n# gym")
    assert "toyq" in job and "GYM_JOB_ID=${TOYQ_JOB_ID" in job
    assert "gym_this_node() {\n    hostname\n}" in staged.files["first/steps/lib.sh"].content
    record = golden_record(staged)
    scripts = submit_side_scripts(staged)
    assert "toyq submit" in scripts["submission.sh"] and "toyq kill" in scripts["cancel.sh"]
    for text in [*(f.content for rel, f in staged.files.items() if rel.endswith(".sh")), *scripts.values()]:
        assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0
    assert not slurm_words_in_text("\n".join([job, *scripts.values()]))

    # Its probe half runs: toyq says the job waits, and status reads that through its backend.
    (tmp_path / "runs").mkdir()
    out = subprocess.run(["bash"], input=scripts["probe.sh"], capture_output=True, text=True).stdout
    assert [s.state for s in statuses_from(record, parse_probe(out, toy), toy)] == ["queued"]


def slurm_words_in_text(text: str) -> list[str]:
    return [match.group() for match in SLURM_WORDS.finditer(text)]
