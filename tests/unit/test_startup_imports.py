"""Each verb imports what it uses (#39): a dry run of ``gym eval submit`` pays for composing,
validating, planning and rendering, never for the other verbs (the gate, the view, the watcher,
results, the results store) nor for what only a real submission does (staging over a connection,
the journal, Slurm's arrays and limits). Checked in a fresh interpreter's ``sys.modules``: what a
test process already imported cannot hide an import, and the modules the dry run needs are
asserted present, so the check cannot pass by running nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "benchmarks" / "vs_upstream_configs" / "realistic.yaml"  # what benchmarks/vs_upstream.py times
PKG = "nemo_gym.orchestration"

# Run gym's own main in a fresh interpreter, then print which modules it loaded.
PROBE = f"""
import json, sys
from {PKG}.cli.main import main
code = main(sys.argv[1:])
print("\\n" + json.dumps({{"code": code, "modules": sorted(sys.modules)}}))
"""

# What a dry run needs: without these it did not compose, validate, plan and render.
NEEDED = [
    f"{PKG}.api",
    f"{PKG}.verbs.submit.command",
    f"{PKG}.library.composing",
    f"{PKG}.verbs.submit.use_case",
    f"{PKG}.plan.building",
    f"{PKG}.render",
    f"{PKG}.backends.slurm",
    "pydantic",
    "jinja2",
    "yaml",
]
# What it must not import: the other verbs, their use cases and heavy libraries, and what only
# queueing for real needs.
NOT_NEEDED = [
    # the other verbs' command-line modules
    *(
        f"{PKG}.verbs.{verb}.command"
        for verb in ("cancel", "compare", "export", "gate", "history", "info", "logs", "plan", "report")
    ),
    *(f"{PKG}.verbs.{verb}.command" for verb in ("resubmit", "results", "status", "view", "watch")),
    # the other use cases and what they stand on
    f"{PKG}.verbs.gate.rules",
    f"{PKG}.verbs.gate.use_case",
    f"{PKG}.verbs.view.pages",
    f"{PKG}.verbs.view.use_case",
    f"{PKG}.verbs.watch.use_case",
    f"{PKG}.library.observing",
    f"{PKG}.verbs.export.use_case",
    f"{PKG}.verbs.resubmit.use_case",
    f"{PKG}.observe",
    f"{PKG}.results",
    f"{PKG}.verbs.report.page",
    f"{PKG}.comparison",
    f"{PKG}.stats",
    f"{PKG}.verbs.plan.sample_size",
    f"{PKG}.store",
    f"{PKG}.usage",
    f"{PKG}.sweep",
    # only a real submission: staging and queueing, its journal, credentials, the site's limits
    f"{PKG}.submission",
    f"{PKG}.journal",
    f"{PKG}.verbs.export.script",
    f"{PKG}.backends.slurm_arrays",
    f"{PKG}.backends.slurm_limits",
    # heavy libraries
    "sqlalchemy",
    "alembic",
    "matplotlib",
    "numpy",
    "scipy",
    "rich",
    "urllib.request",
    "http.client",
    "tarfile",
    "statistics",  # the estimates' medians: only with an earlier run to go by
]


def loaded_by(*argv: str, tmp_path: Path) -> set[str]:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "GYM_RESULTS_URL": "off"}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    answer = json.loads(proc.stdout.rsplit("\n", 2)[-2])
    assert answer["code"] == 0, proc.stderr[-2000:]
    assert "[dry-run] would submit" in proc.stdout  # it really ran the dry run
    return set(answer["modules"])


def test_a_dry_run_imports_what_it_needs_and_nothing_of_the_other_verbs(tmp_path: Path) -> None:
    loaded = loaded_by(
        "eval", "submit", "-c", str(CONFIG), f"job.output_path={tmp_path / 'runs'}", "--dry-run", tmp_path=tmp_path
    )
    assert [m for m in NEEDED if m not in loaded] == []
    assert [m for m in NOT_NEEDED if m in loaded] == []


def test_the_list_of_what_a_dry_run_skips_names_real_modules() -> None:
    """A renamed module would leave its old name here, absent forever: the check would pass vacuously."""
    import importlib.util

    ours = [m for m in NOT_NEEDED if m.startswith(PKG)]
    assert [m for m in ours if importlib.util.find_spec(m) is None] == []
