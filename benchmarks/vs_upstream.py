"""Ours vs the upstream peer (NeMo Gym 0.7.0's own `gym eval submit`), measured in the same run.

    .venv/bin/python benchmarks/vs_upstream.py                  # everything (needs root for the test bed)
    .venv/bin/python benchmarks/vs_upstream.py --no-cluster     # only 1-2 (CLI, dry run) + profile
    .venv/bin/python benchmarks/vs_upstream.py --runs 9 --no-profile

  1. CLI start-up + validation + dry run of a realistic config (2 pools, data-parallel vLLM, Ray,
     2 benchmarks): wall time of the whole command, median of --runs.      target ours/peer <= 0.2
  2. Dry run of 50/100/200 benchmarks (+ --resolve-only at 200), with seconds per benchmark and
     a least-squares fit to show linearity.                                target <= 0.3 and linear
  3. Submission over ssh to the loopback sshd (scripts/local-sshd) of 5 and 50 benchmarks: wall time,
     ssh invocations and round trips, counted by a recording `ssh` first on PATH. The jobs are held
     (--begin=now+1hour) and cancelled at once.                           target: ours <= 3 round trips, constant
     (the site's limits asked, carried by the master connection as it opens; the submission; the
     record)
  4. On the local Slurm cluster (scripts/local-slurm) with the stand-ins of tests/standins: seconds
     from the service being healthy to the driver starting, for both tools.

The peer is the venv $GYM_ENVS_DIR/gym (default ~/.cache/gym-orchestration/envs/gym); it is built
with scripts/setup-envs --only gym when missing. Configs: benchmarks/vs_upstream_configs/ (valid
for both tools: no container_runtime, no local compute, otel off). A benchmark, not a test:
figures vary with the machine's load; both tools are measured interleaved to share the noise.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
CONFIGS = REPO / "benchmarks" / "vs_upstream_configs"
STANDINS = REPO / "tests" / "standins"
ENVS = Path(os.environ.get("GYM_ENVS_DIR", Path.home() / ".cache" / "gym-orchestration" / "envs"))
OURS_PY = REPO / ".venv" / "bin" / "python"
OURS = REPO / ".venv" / "bin" / "gym"
PEER = ENVS / "gym" / "bin" / "gym"
FINAL = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
}
TAG = f"vsu{os.getpid()}"  # in every benchmark name we submit, so cleanup can find our jobs only

rows: list[tuple[str, str, str, str, str, str]] = []  # measurement, ours, peer, ratio, target, verdict
notes: list[str] = []


def log(msg: str) -> None:
    print(f"[vs_upstream] {msg}", file=sys.stderr, flush=True)


def row(
    what: str,
    ours: float | str | None,
    peer: float | str | None,
    target: str = "",
    ok: bool | None = None,
    fmt: str = "{:.3f}",
) -> None:
    def show(v: float | str | None) -> str:
        return "n/a" if v is None else v if isinstance(v, str) else fmt.format(v)

    ratio = f"{ours / peer:.2f}" if isinstance(ours, (int, float)) and isinstance(peer, (int, float)) and peer else "-"
    rows.append((what, show(ours), show(peer), ratio, target, "" if ok is None else ("MET" if ok else "MISSED")))


# ------------------------------------------------------------------------------------------------
# helpers


def ensure_peer() -> None:
    if PEER.exists():
        return
    log(f"peer not found at {PEER}; building it with scripts/setup-envs --only gym")
    subprocess.run([str(REPO / "scripts" / "setup-envs"), "--only", "gym"], check=True)
    if not PEER.exists():
        sys.exit(f"scripts/setup-envs did not produce {PEER}")


def write_config(template: str, dest: Path, benchmarks: dict[str, Any] | None = None) -> Path:
    data = yaml.safe_load((CONFIGS / template).read_text())
    if benchmarks is not None:
        data["driver"]["benchmarks"] = benchmarks
    dest.write_text(yaml.safe_dump(data, sort_keys=False))
    return dest


def many_benchmarks(n: int) -> dict[str, Any]:
    return {f"bench-{i:03d}": {"prepare": {"split": "test"}, "run": {"num_repeats": 2, "seed": i}} for i in range(n)}


def timed(cmd: list[str], env: dict[str, str], check: bool = True) -> tuple[float, subprocess.CompletedProcess]:
    elapsed, _, proc = timed_cpu(cmd, env, check)
    return elapsed, proc


def timed_cpu(
    cmd: list[str], env: dict[str, str], check: bool = True
) -> tuple[float, float, subprocess.CompletedProcess]:
    """Wall seconds, CPU seconds (user+sys of the command and its children) and the result."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return elapsed, cpu, proc


def median_pair(
    cmd_ours: list[str], cmd_peer: list[str], env: dict[str, str], runs: int, cpu: dict[str, float] | None = None
) -> tuple[float, float]:
    """Median wall time of both commands, interleaved, after one untimed warm-up of each.
    With ``cpu``, also store the median CPU times there under "ours" and "peer"."""
    timed(cmd_ours, env)
    timed(cmd_peer, env)
    walls: dict[str, list[float]] = {"ours": [], "peer": []}
    cpus: dict[str, list[float]] = {"ours": [], "peer": []}
    for _ in range(runs):
        for tool, cmd in (("ours", cmd_ours), ("peer", cmd_peer)):
            w, c, _ = timed_cpu(cmd, env)
            walls[tool].append(w)
            cpus[tool].append(c)
    if cpu is not None:
        cpu.update({k: statistics.median(v) for k, v in cpus.items()})
        cpu.update({f"{k}_min": min(v) for k, v in cpus.items()})
    return statistics.median(walls["ours"]), statistics.median(walls["peer"])


def fit(points: dict[int, float]) -> tuple[float, float, float]:
    """Least squares t = a + b*n: (a fixed s, b s/benchmark, worst residual as a fraction of t)."""
    ns, ts = list(points), list(points.values())
    mn, mt = statistics.fmean(ns), statistics.fmean(ts)
    b = sum((n - mn) * (t - mt) for n, t in zip(ns, ts)) / sum((n - mn) ** 2 for n in ns)
    a = mt - b * mn
    worst = max(abs(t - (a + b * n)) / t for n, t in zip(ns, ts))
    return a, b, worst


def shell_exports(script: str) -> dict[str, str]:
    out = subprocess.run([str(REPO / "scripts" / script), "env"], capture_output=True, text=True, check=True).stdout
    return dict(re.findall(r"^export (\w+)=(\S+)$", out, re.M))


def job_state(job_id: str) -> str:
    out = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True).stdout
    m = re.search(r"\bJobState=(\S+)", out)
    return m.group(1) if m else "GONE"


def cancel_ours_and_peers(job_ids: list[str]) -> None:
    """scancel the ids we know, then anything still queued whose name carries our tag."""
    ids = {j for j in job_ids if j}
    out = subprocess.run(["squeue", "-h", "-o", "%i %j"], capture_output=True, text=True).stdout
    ids |= {line.split()[0] for line in out.splitlines() if TAG in line}
    if ids:
        subprocess.run(["scancel", *sorted(ids)], capture_output=True)


def job_ids_of(stdout: str) -> list[str]:
    try:
        return [b["job_id"] for b in json.loads(stdout)["benchmarks"] if b.get("job_id")]
    except (ValueError, KeyError, TypeError):
        return re.findall(r"\b(\d{1,9})\b", stdout)


# ------------------------------------------------------------------------------------------------
# 1-2: start-up, validation, dry run


def measure_cli(work: Path, runs: int) -> None:
    env = {**os.environ, "XDG_CACHE_HOME": str(work / "cache")}
    cfg = write_config("realistic.yaml", work / "realistic.yaml")
    for label, extra in (("eval submit --help (start-up only)", ["--help"]),):
        o, p = median_pair([str(OURS), "eval", "submit", *extra], [str(PEER), "eval", "submit", *extra], env, runs)
        row(f"1. {label}", o, p, "-")
    cpu: dict[str, float] = {}
    o, p = median_pair(
        [str(OURS), "eval", "submit", "-c", str(cfg), "--dry-run"],
        [str(PEER), "eval", "submit", "-c", str(cfg), "--dry-run"],
        env,
        runs,
        cpu,
    )
    row("1. realistic config, whole --dry-run, wall (s)", o, p, "<= 0.2", o / p <= 0.2)
    row("   same, CPU user+sys (s)", cpu["ours"], cpu["peer"], "-")
    floor_o = median_pair([str(OURS_PY), "-c", "pass"], [str(PEER.parent / "python"), "-c", "pass"], env, runs)
    row("   (interpreter floor: python -c pass)", *floor_o, "-")

    per: dict[str, dict[str, dict[int, float]]] = {
        "wall": {"ours": {}, "peer": {}},
        "min cpu": {"ours": {}, "peer": {}},
    }
    for n in (50, 100, 200):
        cfg_n = write_config("realistic.yaml", work / f"bench{n}.yaml", many_benchmarks(n))
        cpu: dict[str, float] = {}
        o, p = median_pair(
            [str(OURS), "eval", "submit", "-c", str(cfg_n), "--dry-run"],
            [str(PEER), "eval", "submit", "-c", str(cfg_n), "--dry-run"],
            env,
            runs,
            cpu,
        )
        per["wall"]["ours"][n], per["wall"]["peer"][n] = o, p
        per["min cpu"]["ours"][n], per["min cpu"]["peer"][n] = cpu["ours_min"], cpu["peer_min"]
        target = "<= 0.3" if n == 200 else "-"
        row(f"2. --dry-run, {n} benchmarks, wall (s)", o, p, target, (o / p <= 0.3) if n == 200 else None)
        row("   same, CPU user+sys (s)", cpu["ours"], cpu["peer"], "-")
        row(f"   wall per benchmark, total/{n} (ms)", o / n * 1e3, p / n * 1e3, "-", fmt="{:.2f}")
    # Linearity is judged on the best-of-N CPU time: the median wall time of a shared machine is
    # too noisy for a slope over 150 benchmarks.
    for kind in ("min cpu", "wall"):
        fits = {tool: fit(per[kind][tool]) for tool in ("ours", "peer")}
        judged = kind == "min cpu"
        verdict = fits["ours"][2] <= 0.10 if judged else None
        row(
            f"2. fit {kind} t=a+b*n: b (ms/benchmark)",
            fits["ours"][1] * 1e3,
            fits["peer"][1] * 1e3,
            "linear" if judged else "-",
            verdict,
            fmt="{:.2f}",
        )
        row(f"   fit {kind}: fixed a (s)", fits["ours"][0], fits["peer"][0], "-")
        row(
            f"   fit {kind}: worst residual (% of t)",
            fits["ours"][2] * 100,
            fits["peer"][2] * 100,
            "<= 10 %" if judged else "-",
            verdict,
            fmt="{:.1f}",
        )
    cfg200 = work / "bench200.yaml"
    o, p = median_pair(
        [str(OURS), "eval", "submit", "-c", str(cfg200), "--resolve-only"],
        [str(PEER), "eval", "submit", "-c", str(cfg200), "--resolve-only"],
        env,
        runs,
    )
    row("2. --resolve-only, 200 benchmarks (s)", o, p, "-")


# ------------------------------------------------------------------------------------------------
# 3: submission over ssh


def ssh_shim(work: Path) -> Path:
    shim = work / "shim"
    shim.mkdir(exist_ok=True)
    (shim / "ssh").write_text(
        "#!/bin/bash\n"
        "# Records every ssh call; VSU_SSH_INJECT adds options (the peer has no GYM_SSH_OPTIONS).\n"
        'printf "%s\\n" "$*" >>"$VSU_SSH_LOG"\n'
        'if [ -n "${VSU_SSH_INJECT:-}" ]; then exec /usr/bin/ssh $VSU_SSH_INJECT "$@"; fi\n'
        'exec /usr/bin/ssh "$@"\n'
    )
    (shim / "ssh").chmod(0o755)
    return shim


def classify_ssh(lines: list[str]) -> dict[str, int]:
    """Master connections, control-socket operations (local), and commands sent to the host."""
    masters = sum("ControlMaster=yes" in c for c in lines)
    control = sum(bool(re.search(r"(^| )-O ", c)) for c in lines)
    rsyncs = sum(" rsync --server" in c for c in lines)
    commands = len(lines) - masters - control
    return {
        "invocations": len(lines),
        "masters": masters,
        "control_ops": control,
        "commands": commands,
        "rsync": rsyncs,
        "round_trips": masters + commands,
    }


def measure_ssh(work: Path, runs: int, host: str, ssh_config: str) -> None:
    shim = ssh_shim(work)
    base = {
        **os.environ,
        "PATH": f"{shim}:{os.environ['PATH']}",
        "XDG_CACHE_HOME": str(work / "cache"),
        "VSU_STANDIN_PATH": f"{STANDINS}:/usr/local/bin:/usr/bin:/bin",
        "VSU_OUT": str(work / "ssh-runs"),
    }
    tools = {
        "ours": ([str(OURS)], {**base, "GYM_SSH_OPTIONS": f"-F {ssh_config}"}),
        # The peer's ssh/rsync take no extra options; the shim gives them the loopback's client config.
        "peer": ([str(PEER)], {**base, "VSU_SSH_INJECT": f"-F {ssh_config}"}),
    }
    hold = [f"++compute.cluster.hostname={host}", "++compute.cluster.extra_args={begin: now+1hour}"]
    results: dict[tuple[str, int], dict[str, Any]] = {}
    submitted: list[str] = []
    try:
        for n in (5, 50):
            cfg = write_config("standins.yaml", work / f"ssh{n}.yaml", {f"{TAG}-s{n}-{i:02d}": {} for i in range(n)})
            for _ in range(runs):
                for tool, (cmd, env) in tools.items():
                    logf = work / f"ssh-{tool}-{n}.log"
                    logf.write_text("")
                    elapsed, proc = timed(
                        [*cmd, "eval", "submit", "-c", str(cfg), "--json", *hold],
                        {**env, "VSU_SSH_LOG": str(logf)},
                        check=False,
                    )
                    ids = job_ids_of(proc.stdout)
                    submitted += ids
                    cancel_ours_and_peers(ids)
                    r = results.setdefault((tool, n), {"times": [], "error": None})
                    if proc.returncode != 0 or len(ids) != n:
                        r["error"] = " ".join((proc.stderr or proc.stdout).split())[-300:] or f"rc={proc.returncode}"
                        continue
                    r["times"].append(elapsed)
                    r["calls"] = classify_ssh(logf.read_text().splitlines())
    finally:
        cancel_ours_and_peers(submitted)
    for n in (5, 50):
        vals = {}
        for tool in ("ours", "peer"):
            r = results[(tool, n)]
            if r["error"] and not r["times"]:
                notes.append(f"3. {tool} ssh submit of {n} failed: {r['error']}")
            vals[tool] = r
        t = {k: statistics.median(v["times"]) if v["times"] else None for k, v in vals.items()}
        c = {k: v.get("calls") for k, v in vals.items()}
        row(f"3. ssh submit, {n} benchmarks, wall (s)", t["ours"], t["peer"], "-")
        rt = {k: (v["round_trips"] if v else None) for k, v in c.items()}
        row(
            "   round trips (master + remote commands)",
            rt["ours"],
            rt["peer"],
            "<= 3",
            rt["ours"] is not None and rt["ours"] <= 3,
            fmt="{:d}",
        )
        inv = {
            k: (
                f"{v['invocations']} ({v['masters']}m+{v['commands']}c+{v['control_ops']}ctl, {v['rsync']} rsync)"
                if v
                else None
            )
            for k, v in c.items()
        }
        row("   ssh invocations (master+cmds+control)", inv["ours"], inv["peer"], "-")
    o5, o50 = (results[("ours", n)].get("calls", {}).get("round_trips") for n in (5, 50))
    rows.append(
        (
            "3. ours round trips constant 5 -> 50",
            f"{o5} -> {o50}",
            "",
            "",
            "constant",
            "MET" if o5 is not None and o5 == o50 and o5 <= 3 else "MISSED",
        )
    )


# ------------------------------------------------------------------------------------------------
# 4: healthy -> driver start on the local Slurm cluster


def standin_time(job_dir: Path, tool: str) -> float | None:
    times = [json.loads(p.read_text())["time"] for p in (job_dir / "standin").glob(f"{tool}-*.json")]
    return min(times) if times else None


def measure_health(work: Path, jobs: int) -> None:
    env = {
        **os.environ,
        "XDG_CACHE_HOME": str(work / "cache"),
        "VSU_STANDIN_PATH": f"{STANDINS}:/usr/local/bin:/usr/bin:/bin",
        "VSU_OUT": str(work / "slurm-runs"),
    }
    figures: dict[str, dict[str, list[float]]] = {}
    port = 20000 + os.getpid() % 20000
    for tool, gym in (("ours", OURS), ("peer", PEER)):
        cfg = write_config("standins.yaml", work / f"health-{tool}.yaml", {f"{TAG}-h{i}": {} for i in range(jobs)})
        # A port of our own: another job on the node (e.g. a test) may hold vLLM's usual 8000.
        _, proc = timed(
            [str(gym), "eval", "submit", "-c", str(cfg), "--json", f"services.policy.port={port}"], env, check=False
        )
        try:
            record = json.loads(proc.stdout)
        except ValueError:
            notes.append(f"4. {tool}: submit failed: {' '.join(proc.stderr.split())[-300:]}")
            cancel_ours_and_peers([])
            continue
        pending = {b["job_id"]: Path(b["job_dir"]) for b in record["benchmarks"] if b.get("job_id")}
        deadline = time.monotonic() + 240
        states = {}
        try:
            while pending.keys() - states.keys() and time.monotonic() < deadline:
                for jid in pending.keys() - states.keys():
                    if (s := job_state(jid)) in FINAL or s == "GONE":
                        states[jid] = s
                time.sleep(0.5)
        finally:
            cancel_ours_and_peers(list(pending))
        f = figures.setdefault(tool, {"events": [], "standins": []})
        for jid, job_dir in pending.items():
            if states.get(jid) != "COMPLETED":
                notes.append(f"4. {tool} job {jid} ended {states.get(jid, 'TIMED OUT (cancelled)')}; see {job_dir}")
            logs = " ".join(p.read_text(errors="replace") for p in (job_dir / "logs").glob("policy*"))
            if "Address already in use" in logs:
                notes.append(f"4. {tool} job {jid}: port {port} was taken on its node; its figures are left out")
                continue
            ev = job_dir / ".gym" / jid / "events"
            if ev.exists():
                stamps = {}
                for line in ev.read_text().splitlines():
                    stamp, name = line.split(" ", 1)
                    stamps.setdefault(name, float(stamp))
                if "healthy policy" in stamps and "driver-start" in stamps:
                    f["events"].append(stamps["driver-start"] - stamps["healthy policy"])
            up, drv = standin_time(job_dir, "vllm"), standin_time(job_dir, "gym-run")
            if up is not None and drv is not None:
                f["standins"].append(drv - up)
    med = {t: {k: (statistics.median(v) if v else None) for k, v in f.items()} for t, f in figures.items()}
    ours, peer = med.get("ours", {}), med.get("peer", {})
    row("4. healthy -> driver-start, job events (s)", ours.get("events"), "no events", "-")
    row("4. server up -> driver running, stand-in stamps (s)", ours.get("standins"), peer.get("standins"), "-")
    if peer.get("standins") is None:
        row("   peer derived from its 5 s poll (not measured)", None, "0-5 (mean 2.5)", "-")


# ------------------------------------------------------------------------------------------------
# profile of our CLI


PHASES = r"""
import io, sys, time, contextlib
t = [time.perf_counter()]
marks = []
def mark(name):
    t.append(time.perf_counter()); marks.append((name, (t[-1] - t[-2]) * 1e3))
import yaml; mark("import yaml")
import pydantic; mark("import pydantic (+pydantic_core)")
import omegaconf; mark("import omegaconf")
import hydra, hydra.compose, hydra.initialize; mark("import hydra (+compose/initialize)")
import jinja2; mark("import jinja2")
import rich; mark("import rich")
import nemo_gym.orchestration.cli.main as m; m.build_parser(); mark("import our CLI modules + parser (rest)")
from nemo_gym.orchestration.compose import compose_config
from nemo_gym.orchestration.validate import validate_config
from nemo_gym.orchestration.plan.building import build_plan
from nemo_gym.orchestration.render import render_run
from nemo_gym.orchestration.runid import new_run_id
from nemo_gym.orchestration.resolved import resolved_config_dict
mark("import plan/render modules")
import nemo_gym.orchestration.compose as c
from pathlib import Path
if hasattr(c, "_precheck_yaml") and hasattr(c, "_hydra_compose"):
    c._precheck_yaml(Path(sys.argv[1])); mark("compose: YAML precheck (yaml.safe_load)")
    c._hydra_compose(Path(sys.argv[1]), []); mark("compose: Hydra initialize+compose+to_container")
data = compose_config(sys.argv[1], []); mark("compose_config (whole, again, warm)")
config, _ = validate_config(data); mark("validate (pydantic SubmitConfig)")
resolved_config_dict(config); mark("resolved_config_dict (--resolve-only)")
plan = build_plan(config, new_run_id()); mark("build_plan")
staged = render_run(plan); mark("render_run (Jinja2, all files)")
buf = io.StringIO()
for job in plan.jobs: buf.write(staged.job_script(job.benchmark))
mark("print job scripts")
for name, ms in marks: print(f"{ms:9.1f} ms  {name}")
"""


def profile_ours(work: Path) -> list[str]:
    out: list[str] = []
    env = {**os.environ, "XDG_CACHE_HOME": str(work / "cache")}
    for label, cfg in (("realistic", work / "realistic.yaml"), ("200 benchmarks", work / "bench200.yaml")):
        runs = [
            subprocess.run([str(OURS_PY), "-c", PHASES, str(cfg)], capture_output=True, text=True, env=env)
            for _ in range(5)
        ]
        if any(r.returncode for r in runs):
            out.append(f"phase timing ({label}) failed: {runs[0].stderr.strip().splitlines()[-1:]}")
            continue
        table = [[line.split("ms", 1) for line in r.stdout.splitlines()] for r in runs]
        out.append(f"phases, {label} (median of 5 fresh interpreters):")
        for i, (_, name) in enumerate(table[0]):
            out.append(f"  {statistics.median(float(t[i][0]) for t in table):8.1f} ms {name.strip()}")
    # -X importtime: exclusive (self) import time summed per top-level package.
    proc = subprocess.run(
        [
            str(OURS_PY),
            "-X",
            "importtime",
            "-m",
            "nemo_gym.orchestration.cli.main",
            "eval",
            "submit",
            "-c",
            str(work / "realistic.yaml"),
            "--dry-run",
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    by_pkg: dict[str, int] = {}
    firsts: list[tuple[int, str]] = []
    total = 0
    for line in proc.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", line)
        if not m:
            continue
        name = m.group(4)
        if len(m.group(3)) <= 1:
            firsts.append((int(m.group(2)), name))
        key = name if name.startswith("nemo_gym") else name.split(".")[0]
        by_pkg[key] = by_pkg.get(key, 0) + int(m.group(1))
        total += int(m.group(1))
    out.append(f"-X importtime, self time per package (all imports {total / 1e3:.0f} ms, inflated by the tracing):")
    for key, us in sorted(by_pkg.items(), key=lambda kv: -kv[1])[:12]:
        out.append(f"  {us / 1e3:8.1f} ms {key}")
    out.append("-X importtime, first-level imports (cumulative: what each one pulls in first):")
    for m in sorted(firsts, key=lambda m: -m[0])[:10]:
        out.append(f"  {m[0] / 1e3:8.1f} ms {m[1]}")
    # cProfile of compose+validate+plan+render for 200 benchmarks, imports done beforehand.
    prof = work / "cli200.prof"
    code = (
        "import cProfile, sys, io, contextlib\n"
        "from nemo_gym.orchestration.cli.main import main\n"
        "import nemo_gym.orchestration.cli.launching, jinja2, hydra.compose\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f'    cProfile.run(\'main(["eval", "submit", "-c", sys.argv[1], "--dry-run"])\', {str(prof)!r})\n'
    )
    subprocess.run([str(OURS_PY), "-c", code, str(work / "bench200.yaml")], env=env, capture_output=True)
    if prof.exists():
        import pstats

        stats = pstats.Stats(str(prof))
        entries = []
        for (file, _line, fn), (_cc, nc, tt, ct, _) in stats.stats.items():  # type: ignore[attr-defined]
            entries.append((ct, tt, nc, f"{Path(file).parent.name}/{Path(file).name}:{fn}"))
        ours_fns = sorted(
            (e for e in entries if "/orchestration/" in e[3] or e[3].startswith(("orchestration/", "cli/"))),
            key=lambda e: -e[0],
        )[:10]
        out.append("cProfile, 200-benchmark dry run after imports: our functions by cumulative time:")
        out += [
            f"  {ct * 1e3:8.1f} ms cum {tt * 1e3:7.1f} ms self {nc:6d} calls  {name}" for ct, tt, nc, name in ours_fns
        ]
        out.append("cProfile: top self time anywhere:")
        out += [
            f"  {tt * 1e3:8.1f} ms self {nc:7d} calls  {name}"
            for ct, tt, nc, name in sorted(entries, key=lambda e: -e[1])[:10]
        ]
    return out


# ------------------------------------------------------------------------------------------------


def compile_ours() -> None:
    """Both tools start from bytecode, as an installed package does (pip compiles the peer's at
    install): an editable checkout under PYTHONDONTWRITEBYTECODE=1, as shells here set it, would
    otherwise compile some 90 modules again on every run (about 0.1 s)."""
    subprocess.run([str(OURS_PY), "-m", "compileall", "-q", str(REPO / "src")], check=True, capture_output=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=9, help="timed runs per figure for 1-2 (median; >= 5)")
    parser.add_argument("--ssh-runs", type=int, default=3, help="timed submissions per figure for 3")
    parser.add_argument("--health-jobs", type=int, default=3, help="jobs per tool for 4 (3 nodes run them at once)")
    parser.add_argument("--no-cluster", action="store_true", help="skip 3-4 (no sshd/Slurm test bed)")
    parser.add_argument("--no-profile", action="store_true", help="skip the profile of our CLI")
    parser.add_argument("--keep", action="store_true", help="keep the work dir under /tmp")
    args = parser.parse_args()
    if args.runs < 5:
        parser.error("--runs must be >= 5")
    ensure_peer()
    compile_ours()
    work = Path(tempfile.mkdtemp(prefix="gym-vs-upstream-", dir="/tmp"))
    log(f"work dir {work}; ours {OURS}; peer {PEER}")
    profile: list[str] = []
    try:
        log("1-2: CLI and dry runs")
        measure_cli(work, args.runs)
        if not args.no_cluster:
            for script in ("local-slurm", "local-sshd"):
                up = subprocess.run([str(REPO / "scripts" / script), "up"], capture_output=True, text=True)
                if up.returncode != 0:
                    notes.append(f"{script} up failed, 3-4 skipped: {up.stderr.strip().splitlines()[-1:]}")
                    break
            else:
                os.environ.update(shell_exports("local-slurm"))
                sshd = shell_exports("local-sshd")
                log("3: ssh submission")
                measure_ssh(work, args.ssh_runs, sshd["GYM_TEST_SSH_HOST"], sshd["GYM_TEST_SSH_CONFIG"])
                log("4: healthy -> driver start on the local cluster")
                measure_health(work, args.health_jobs)
        if not args.no_profile:
            log("profile of our CLI")
            profile = profile_ours(work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    widths = [
        max(len(r[i]) for r in rows + [("measurement", "ours", "peer", "ours/peer", "target", "")]) for i in range(6)
    ]
    header = ("measurement", "ours", "peer", "ours/peer", "target", "")
    print(f"ours: {OURS}\npeer: {PEER} (NeMo Gym 0.7.0)")
    for r in [header, tuple("-" * w for w in widths), *rows]:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip())
    for n in notes:
        print(f"note: {n}")
    if profile:
        print("\nProfile of our CLI")
        print("\n".join(profile))
    return 0


if __name__ == "__main__":
    sys.exit(main())
