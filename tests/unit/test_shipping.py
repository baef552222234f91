"""How Python leaves this machine (shipping.py): every program's modules are all it imports, stdlib
and Python 3.8 otherwise; both forms run the program's module as __main__, importing nothing from
the current directory or PYTHONPATH; and no other module builds Python for another host, nor
imports "when staged" a second way."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from nemo_gym.orchestration import shipping
from nemo_gym.orchestration.shipping import PACKAGE, Program

SRC = Path(shipping.__file__).parent


def imports_of(source: str) -> set[str]:
    """Every module a source imports: ``from P import M`` as ``P.M`` where P is one of our
    packages (M is then a module), as ``X`` for any other ``from X import name``."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module in (PACKAGE, f"{PACKAGE}.exporters", f"{PACKAGE}.backends", f"{PACKAGE}.gateway"):
                names |= {f"{node.module}.{alias.name}" for alias in node.names}
            else:
                names.add(node.module)
    return names


@pytest.mark.parametrize("program", list(Program), ids=lambda p: p.name)
def test_a_program_s_modules_are_everything_it_imports_of_ours_and_python_3_8(program: Program) -> None:
    modules = {f"{PACKAGE}.{name}" for name in program.modules}
    for name in program.modules:
        source = shipping.module_source(name)
        ast.parse(source, feature_version=(3, 8))
        ours = {i for i in imports_of(source) if i.startswith("nemo_gym")}
        assert ours <= modules, (name, ours - modules)
        stdlib = {i.split(".")[0] for i in imports_of(source) if not i.startswith("nemo_gym")}
        # The gateway runs in its Ray container (ray[serve] brings starlette); the W&B exporter
        # imports wandb only where the job has it.
        assert stdlib <= set(sys.stdlib_module_names) | {"ray", "aiohttp", "starlette", "wandb"}, (name, stdlib)


def plant_impostors(where: Path) -> None:
    """A ``nemo_gym`` and a ``contract.py`` that fail loudly if anything imports them."""
    fake = where / "nemo_gym" / "orchestration"
    fake.mkdir(parents=True)
    (where / "nemo_gym" / "__init__.py").write_text("raise SystemExit('impostor nemo_gym imported')\n")
    (fake / "__init__.py").write_text("")
    (where / "contract.py").write_text("raise SystemExit('impostor contract imported')\n")


def test_the_inline_form_imports_from_itself_only(tmp_path: Path) -> None:
    plant_impostors(tmp_path)
    proc = subprocess.run(
        ["python3", "-", "bogus"],
        input=shipping.inline(Program.SHARDS),
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)},
    )
    assert proc.returncode == 2 and proc.stderr.startswith("usage: shards.py slice"), proc.stderr


def test_the_staged_tree_runs_its_module_as_main_and_nothing_planted(tmp_path: Path) -> None:
    job = tmp_path / "job"
    for rel, text in shipping.staged(Program.RESUME_JUDGE, "backends.slurm_node").items():
        (job / rel).parent.mkdir(parents=True, exist_ok=True)
        (job / rel).write_text(text)
    planted = tmp_path / "cwd"
    planted.mkdir()
    plant_impostors(planted)
    words = shipping.launch_words(Program.RESUME_JUDGE, tree=str(job)).split()
    assert words[:3] == ["python3", "-E", "-s"]
    proc = subprocess.run(
        [*words, "bogus"],
        capture_output=True,
        text=True,
        cwd=planted,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(planted), "GYM_JOB_DIR": str(job), "GYM_JOB_ID": "1"},
    )
    assert "impostor" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode != 0 and "resume.py" in proc.stderr + proc.stdout, proc.stderr
    # The judge finds its scheduler's module in the tree, by its own name.
    probe = (
        "from nemo_gym.orchestration.resume import load_scheduler; print(type(load_scheduler('slurm_node')).__name__)"
    )
    found = subprocess.run(["python3", "-E", "-s", "-c", probe], capture_output=True, text=True, cwd=job / "steps/py")
    assert found.stdout.strip() == "NodeScheduler", found.stderr


def test_the_packages_shipped_are_empty_and_the_gateway_keeps_its_environment() -> None:
    files = shipping.staged(Program.EXPORTERS)
    inits = {rel: text for rel, text in files.items() if rel.endswith("__init__.py")}
    assert set(inits) == {
        "steps/py/nemo_gym/__init__.py",
        "steps/py/nemo_gym/orchestration/__init__.py",
        "steps/py/nemo_gym/orchestration/exporters/__init__.py",
    }
    assert set(inits.values()) == {""}
    assert " -E -s " not in shipping.launch_words(Program.GATEWAY, isolated=False)


def test_no_other_module_builds_python_for_another_host_nor_imports_a_second_way() -> None:
    builders = ("spec_from_loader", "exec(compile(", "resources.files(", "MetaPathFinder", "run_module(")
    for path in SRC.rglob("*.py"):
        text = path.read_text()
        if path.name == "shipping.py":
            continue
        assert "if __package__" not in text, path
        found = [word for word in builders if word in text]
        # The templating environment reads templates, not modules.
        assert not found or path.name == "templating.py" and found == ["resources.files("], (path, found)
