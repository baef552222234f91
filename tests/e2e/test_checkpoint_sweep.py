"""The README's second step for real: scripts/checkpoint-sweep submits a local sweep over the three
checkpoints scripts/setup-envs trains (the tiny model taught answer-judge's own verdicts: step-0,
step-30, step-80), each served by the real vLLM and scored by the real gym eval run; the rewards
rise with the step and the last against step-0 is an improvement, p < 0.05. With
GYM_README_SCREENSHOTS=DIR (scripts/readme-screenshots) it also pictures the report and the view."""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ENVS = Path(os.environ.get("GYM_ENVS_DIR", Path.home() / ".cache" / "gym-orchestration" / "envs"))

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


@pytest.fixture(scope="module")
def checkpoints() -> Path:
    found = ENVS / "models" / "tiny-judge"
    if not (found / ".setup-envs-done").exists():
        if os.environ.get("GYM_REQUIRE_CLUSTER") == "1":
            pytest.fail(f"no checkpoints under {found} (scripts/setup-envs makes them)")
        pytest.skip(f"no checkpoints under {found} (run scripts/setup-envs)")
    return found


def test_the_checkpoint_sweep_rises_and_its_last_checkpoint_is_significantly_better(
    checkpoints, tmp_path, monkeypatch
) -> None:
    env = {**os.environ, "GYM_ENVS_DIR": str(ENVS), "GYM_RUNS_DIR": str(tmp_path / "runs")}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    done = subprocess.run(
        [str(REPO / "scripts" / "checkpoint-sweep")], capture_output=True, text=True, env=env, timeout=1800
    )
    out = done.stdout
    assert done.returncode == 0, f"{out[-3000:]}\n{done.stderr[-3000:]}"
    [sweep_id] = re.findall(r"^Sweep (gym-sweep-\S+):", out, re.MULTILINE)

    from nemo_gym.orchestration import library

    monkeypatch.setenv("XDG_CACHE_HOME", env["XDG_CACHE_HOME"])
    records = library.select([sweep_id]).records
    steps = sorted(checkpoints.glob("step-*"), key=lambda p: int(p.name.split("-")[1]))
    assert len(steps) == 3 and [r.model for r in records] == [str(p) for p in steps]
    runs = library.results(records)
    values = [run.benchmarks[0].value for run in runs]
    assert all(run.complete is True for run in runs), out
    # Sampled at vLLM's default temperature, 12 tasks: the middle checkpoint (about 0.4 a task)
    # may draw more or fewer; the order of first, middle and last is what training gives.
    assert values[0] <= values[1] <= values[2] and values[0] < values[2] and values[2] >= 0.75, values
    comparison = library.compare(records[0], records[2])
    [bench] = comparison.benchmarks
    paired = bench.paired
    # The suite's verdict (read off the adjusted p; one benchmark here) with the test that uses the
    # repeats' size where scores are not 0/1.
    assert bench.verdict == "improved" and paired.p_value is not None and paired.p_value < 0.05, bench.as_dict()
    assert bench.p_for_verdict is not None and bench.p_for_verdict < 0.05, bench.as_dict()
    assert not bench.uncomparable and not bench.flags, bench.as_dict()  # the same tasks, complete
    # The script's own words: the comparison passed, the report written, the view named.
    assert "improved" in out and f"gym eval view {sweep_id}" in out
    report = tmp_path / "runs" / f"{sweep_id}.html"
    assert report.is_file() and "<svg" in report.read_text()

    shots = os.environ.get("GYM_README_SCREENSHOTS")
    if shots:
        picture(Path(shots), report, records)


def picture(where: Path, report: Path, records) -> None:
    """The README's pictures: the report, and the view's sweep and side-by-side pages."""
    from browser import open_page

    from nemo_gym.orchestration.library import Viewer, serve

    where.mkdir(parents=True, exist_ok=True)
    open_page(report.resolve().as_uri(), where / "checkpoint-report.png")
    server = serve(Viewer([]), "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        open_page(f"{base}/sweep/{records[0].sweep_id}", where / "view-sweep.png")
        open_page(f"{base}/compare/{records[0].gym_job_id}/{records[2].gym_job_id}", where / "view-compare.png")
        open_page(f"{base}/samples/{records[2].gym_job_id}/answer-judge", where / "view-samples.png")
    finally:
        server.shutdown()
        server.server_close()
    print(json.dumps({"screenshots": sorted(p.name for p in where.glob("*.png"))}))
