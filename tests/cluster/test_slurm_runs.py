"""Every deployment mode really run on the local Slurm cluster (3 nodes in network namespaces,
4 fake GPUs each, a fake Pyxis SPANK plugin). The model server, Ray and the gym driver are
stand-ins (tests/standins: there is no GPU and no container image here) that record what each
node received, so the tests assert addresses, ranks, ports and placement as the nodes saw them."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import standin_records, state_of
from test_sweeps import submit_sweep_cli

pytestmark = [pytest.mark.slow, pytest.mark.cluster]


def test_two_pools_dp_vllm_and_ray_two_benchmarks_complete(cluster_run) -> None:
    config = cluster_run.config(
        services={
            "policy": {
                "type": "vllm",
                "model": "/models/tiny",
                "served_model_name": "tiny",
                "node_pool": "serve",
                "number_of_instances": 4,
                "tensor_parallel_size": 2,
            },
            "envs": {"type": "ray", "node_pools": ["workers"], "resources": {"workers": {"sandbox": 4}}},
        },
        pools={
            "serve": {"partition": "debug", "nodes": 2, "gpus_per_node": 4},
            "workers": {"partition": "debug", "nodes": 1, "gpus_per_node": 4},
        },
        benchmarks={"first": {"run": {"limit": 3}}, "second": {}},
        driver={
            "policy_model": "policy",
            "env": {
                "PATH": cluster_run.config({})["driver"]["env"]["PATH"],
                "RAY_ADDRESS": "runtime:GYM_RAY_ADDRESS_ENVS",
            },
        },
    )
    record = cluster_run.submit(config)
    jobs = {b["benchmark"]: b for b in record["benchmarks"]}
    assert set(jobs) == {"first", "second"} and all(b["job_id"] for b in jobs.values())
    assert len({b["job_id"] for b in jobs.values()}) == 2
    on_disk = json.loads(Path(record["run_dir"], "gym-job.json").read_text())
    assert on_disk == record
    for job in jobs.values():
        fields = cluster_run.wait(job["job_id"])
        assert fields["JobState"] == "COMPLETED", Path(job["job_dir"], f"slurm-{job['job_id']}.out").read_text()
        assert state_of(job["job_dir"])["phase"] == "succeeded"
        vllm = {r["host"]: r for r in standin_records(job["job_dir"], "vllm")}
        assert set(vllm) == {"n1", "n2"}  # the serve pool: the first two nodes
        head, worker = vllm["n1"]["argv"], vllm["n2"]["argv"]
        head_ip = head[head.index("--data-parallel-address") + 1]
        assert worker[worker.index("--data-parallel-address") + 1] == head_ip
        assert head_ip.startswith("198.18.0.")  # the head's real address, not localhost
        assert "--headless" not in head and "--headless" in worker
        assert worker[worker.index("--data-parallel-start-rank") + 1] == "2"
        assert head[head.index("--data-parallel-size-local") + 1] == "2"
        ray = {r["host"]: r["argv"] for r in standin_records(job["job_dir"], "ray")}
        assert set(ray) == {"n1", "n3"}  # head on the driver's node, a worker on the workers pool
        assert "--head" in ray["n1"]
        assert '--resources={"sandbox":4}' in ray["n3"]
        assert any(a.startswith(f"--address={head_ip}:6379") for a in ray["n3"])
        [driver] = standin_records(job["job_dir"], "gym-run")
        assert driver["host"] == "n1"
        assert driver["policy_models"]["data"][0]["id"] == "tiny"
        assert driver["env"]["RAY_ADDRESS"] == f"{head_ip}:6379"
        assert Path(job["job_dir"], "artifacts", "rollouts.jsonl").read_text().count("\n") == 3
        logs = {p.name for p in Path(job["job_dir"], "logs").iterdir()}
        jid = job["job_id"]
        assert {f"policy-{jid}-n1.log", f"policy-{jid}-n2.log", f"envs-{jid}.log", f"driver-{jid}.log"} <= logs


def test_each_step_runs_once_per_node_whatever_ntasks_per_node(cluster_run) -> None:
    config = cluster_run.config(
        services={"policy": {"type": "vllm", "model": "m", "number_of_instances": 3}},
        pools={"all": {"partition": "debug", "nodes": 3, "ntasks_per_node": 4}},
        driver={"policy_model": "policy"},
    )
    [job] = cluster_run.submit(config)["benchmarks"]
    assert cluster_run.wait(job["job_id"])["JobState"] == "COMPLETED"
    hosts = sorted(r["host"] for r in standin_records(job["job_dir"], "vllm"))
    assert hosts == ["n1", "n2", "n3"]
    assert len(standin_records(job["job_dir"], "gym-run")) == 1


def test_pyxis_options_reach_the_step_and_env_is_read_on_the_node(cluster_run, monkeypatch) -> None:
    monkeypatch.setenv("GYM_TEST_SECRET_VALUE", "s3cret-from-the-submit-host")
    config = cluster_run.config(
        services={
            "policy": {
                "type": "vllm",
                "model": "/models/Qwen 8B (it's)",
                "container": "nvcr.io#nvidia/vllm:25.09",
                "mounts": ["/tmp:/data:ro"],
                "extra_args": "--chat-template '{{ x }}' --seed 1",
                "env": {
                    "PATH": cluster_run.config({})["driver"]["env"]["PATH"],
                    "GYM_WHERE": "runtime:SLURMD_NODENAME",
                    "HF_TOKEN": "host:GYM_TEST_SECRET_VALUE",
                },
            }
        },
    )
    record = cluster_run.submit(config)
    [job] = record["benchmarks"]
    assert cluster_run.wait(job["job_id"])["JobState"] == "COMPLETED"
    [vllm] = standin_records(job["job_dir"], "vllm")
    assert vllm["argv"][:2] == ["serve", "/models/Qwen 8B (it's)"]
    assert vllm["argv"][-4:] == ["--chat-template", "{{ x }}", "--seed", "1"]
    assert vllm["env"]["PYXIS_CONTAINER_IMAGE"] == "nvcr.io#nvidia/vllm:25.09"
    assert "/tmp:/data:ro" in vllm["env"]["PYXIS_CONTAINER_MOUNTS"]
    assert vllm["env"]["GYM_WHERE"] == vllm["host"]
    assert vllm["env"]["HF_TOKEN"] == "sha256:" + hashlib.sha256(b"s3cret-from-the-submit-host").hexdigest()
    for path in Path(record["run_dir"]).rglob("*"):
        if path.is_file():
            assert b"s3cret-from-the-submit-host" not in path.read_bytes(), path


def test_one_instance_across_nodes_runs_on_its_own_ray_cluster(cluster_run) -> None:
    config = cluster_run.config(
        services={"policy": {"type": "vllm", "model": "big", "tensor_parallel_size": 4, "pipeline_parallel_size": 2}},
        pools={"gpu": {"partition": "debug", "nodes": 2, "gpus_per_node": 4}},
        driver={"policy_model": "policy"},
        compute={"container_runtime": "none"},
    )
    [job] = cluster_run.submit(config)["benchmarks"]
    fields = cluster_run.wait(job["job_id"])
    assert fields["JobState"] == "COMPLETED", Path(job["job_dir"], f"slurm-{job['job_id']}.out").read_text()
    [vllm] = standin_records(job["job_dir"], "vllm")
    assert vllm["host"] == "n1" and "--distributed-executor-backend" in vllm["argv"]
    ray = {r["host"]: r["argv"] for r in standin_records(job["job_dir"], "ray")}
    assert "--head" in ray["n1"] and any(a.startswith("--address=") for a in ray["n2"])


def slurm_out(job: dict) -> str:
    return Path(job["job_dir"], f"slurm-{job['job_id']}.out").read_text()


def test_service_failing_at_start_fails_the_job_fast_with_its_name(cluster_run) -> None:
    config = cluster_run.config(
        services={"policy": {"type": "vllm", "model": "/models/FAIL_AT_START"}}, driver={"policy_model": "policy"}
    )
    [job] = cluster_run.submit(config)["benchmarks"]
    start = time.monotonic()
    fields = cluster_run.wait(job["job_id"], timeout=60)
    assert fields["JobState"] == "FAILED"
    assert time.monotonic() - start < 20
    out = slurm_out(job)
    assert "service policy died on node n1 (exit status 3)" in out
    assert "cannot load model '/models/FAIL_AT_START'" in out  # the end of its log, in the job log
    assert state_of(job["job_dir"])["phase"] == "failed"
    assert standin_records(job["job_dir"], "gym-run") == []  # the driver never started


def test_service_dying_mid_run_stops_the_driver(cluster_run) -> None:
    config = cluster_run.config(
        services={
            "policy": {
                "type": "vllm",
                "model": "m",
                "env": {"PATH": cluster_run.config({})["driver"]["env"]["PATH"], "STANDIN_DIE_AFTER": "lit:3"},
            }
        },
        driver={
            "policy_model": "policy",
            "env": {"PATH": cluster_run.config({})["driver"]["env"]["PATH"], "STANDIN_DRIVER_SECONDS": "lit:120"},
        },
    )
    [job] = cluster_run.submit(config)["benchmarks"]
    start = time.monotonic()
    fields = cluster_run.wait(job["job_id"], timeout=60)
    assert fields["JobState"] == "FAILED"
    assert time.monotonic() - start < 30  # not the driver's 120 s, nor the walltime
    assert "service policy died on node n1 (exit status 7)" in slurm_out(job)
    assert "service policy died" in state_of(job["job_dir"])["detail"]


def test_health_timeout_names_the_service(cluster_run) -> None:
    config = cluster_run.config(
        services={"policy": {"type": "vllm", "model": "m", "health_check": {"path": "/never", "timeout_seconds": 2}}},
    )
    [job] = cluster_run.submit(config)["benchmarks"]
    assert cluster_run.wait(job["job_id"], timeout=60)["JobState"] == "FAILED"
    assert "service policy not healthy within 2s" in slurm_out(job)


def test_driver_failure_is_the_job_failure(cluster_run) -> None:
    config = cluster_run.config(
        services={"policy": {"type": "vllm", "model": "m"}},
        driver={
            "policy_model": "policy",
            "env": {"PATH": cluster_run.config({})["driver"]["env"]["PATH"], "STANDIN_DRIVER_FAIL": "lit:1"},
        },
    )
    [job] = cluster_run.submit(config)["benchmarks"]
    fields = cluster_run.wait(job["job_id"], timeout=60)
    assert fields["JobState"] == "FAILED" and fields["ExitCode"].startswith("5:")
    assert "the driver failed with exit status 5" in slurm_out(job)
    assert "stand-in gym: failing as asked" in slurm_out(job)


def test_sbatch_refusal_is_parsed_per_benchmark(cluster_run) -> None:
    config = cluster_run.config(
        services={"policy": {"type": "vllm", "model": "m"}},
        pools={"gpu": {"partition": "nosuchpartition"}},
        benchmarks={"a": {}, "b": {}},
    )
    record = cluster_run.submit(config, expect_rc=1)
    for job in record["benchmarks"]:
        assert job["job_id"] is None and "invalid partition" in job["error"].lower()
    assert "2 benchmark(s) failed to submit: a, b" in cluster_run.last_stderr


def test_otel_collector_starts_first_is_checked_and_stopped_gracefully(cluster_run, monkeypatch) -> None:
    monkeypatch.setenv("OTEL_TOKEN", "otel-token-never-on-disk")
    config = cluster_run.config(
        services={"policy": {"type": "vllm", "model": "m", "number_of_instances": 2}},
        pools={"gpu": {"partition": "debug", "nodes": 2, "gpus_per_node": 4}},
        driver={"policy_model": "policy"},
    )
    config["otel"] = {
        "endpoint": "https://otel.example.com",
        "service_name": "gym-tests",
        "gym_telemetry": False,
        "binary": str(Path(__file__).resolve().parents[1] / "standins" / "otelcol-contrib"),
    }
    record = cluster_run.submit(config)
    [job] = record["benchmarks"]
    assert cluster_run.wait(job["job_id"])["JobState"] == "COMPLETED", slurm_out(job)
    [collector] = standin_records(job["job_dir"], "otelcol")
    assert collector["host"] == "n1" and collector["config_exists"]
    assert collector["env"]["OTEL_TOKEN"] == "sha256:" + hashlib.sha256(b"otel-token-never-on-disk").hexdigest()
    assert sorted(collector["node_vars"]) == ["GYM_NODE_0", "GYM_NODE_1"]
    assert all(v.startswith("198.18.0.") for v in collector["node_vars"].values())
    events = Path(job["job_dir"], ".gym", job["job_id"], "events").read_text().split("\n")
    names = [line.split(" ", 1)[1] for line in events if line]
    assert names.index("healthy otel_collector") < names.index("launched policy")  # first, and checked
    assert names.index("driver-end 0") < names.index("collector-stopped") < names.index("job-end 0")
    flushed = float(Path(job["job_dir"], "otel", "flushed").read_text())
    stopped = float(next(line.split()[0] for line in events if line.endswith("collector-stopped")))
    assert flushed <= stopped  # it wrote its data before the job went on
    [driver] = standin_records(job["job_dir"], "gym-run")
    assert driver["env"]["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://localhost:4318"
    for path in Path(record["run_dir"]).rglob("*"):
        if path.is_file():
            assert b"otel-token-never-on-disk" not in path.read_bytes(), path


def test_two_node_config_dp_service_and_ray_service_two_benchmarks(cluster_run) -> None:
    """The issue's own acceptance case: two nodes, a data-parallel vLLM service pinned to one
    pool, a ray service on the other, two benchmarks: two jobs that complete, both recorded."""
    config = cluster_run.config(
        services={
            "policy": {
                "type": "vllm",
                "model": "m",
                "node_pool": "serve",
                "number_of_instances": 2,
                "tensor_parallel_size": 2,
            },
            "envs": {"type": "ray", "node_pools": ["workers"]},
        },
        pools={
            "serve": {"partition": "debug", "nodes": 1, "gpus_per_node": 4},
            "workers": {"partition": "debug", "nodes": 1, "gpus_per_node": 4},
        },
        benchmarks={"one": {}, "two": {}},
        driver={"policy_model": "policy"},
    )
    record = cluster_run.submit(config)
    assert [b["benchmark"] for b in record["benchmarks"]] == ["one", "two"]
    on_disk = json.loads(Path(record["run_dir"], "gym-job.json").read_text())
    assert [b["job_id"] for b in on_disk["benchmarks"]] == [b["job_id"] for b in record["benchmarks"]]
    for job in record["benchmarks"]:
        assert cluster_run.wait(job["job_id"])["JobState"] == "COMPLETED", slurm_out(job)
        [vllm] = standin_records(job["job_dir"], "vllm")  # data parallel on its one node
        assert vllm["argv"][vllm["argv"].index("--data-parallel-size") + 1] == "2"
        ray = {r["host"] for r in standin_records(job["job_dir"], "ray")}
        assert len(ray) == 2  # head beside the driver, a worker on the workers pool


def test_apptainer_runtime_runs_each_step_in_its_image(cluster_run) -> None:
    config = cluster_run.config(
        services={
            "policy": {
                "type": "vllm",
                "model": "m",
                "container": "nvcr.io#nvidia/vllm:25.09",
                "mounts": ["/tmp:/data:ro"],
            }
        },
        driver={"policy_model": "policy", "container": "/images/gym.sif"},
        compute={"container_runtime": "apptainer"},
    )
    [job] = cluster_run.submit(config, path_prefix=str(Path(__file__).resolve().parents[1] / "standins"))["benchmarks"]
    assert cluster_run.wait(job["job_id"])["JobState"] == "COMPLETED", slurm_out(job)
    images = {r["image"]: r for r in standin_records(job["job_dir"], "apptainer")}
    assert set(images) == {"docker://nvcr.io/nvidia/vllm:25.09", "/images/gym.sif"}
    service = images["docker://nvcr.io/nvidia/vllm:25.09"]
    assert service["binds"] == [f"{job['job_dir']}:{job['job_dir']},/tmp:/data:ro"]
    assert "--nv" not in service["command"]  # options are apptainer's, the command is the step's
    [vllm] = standin_records(job["job_dir"], "vllm")
    assert vllm["env"].get("GYM_STEP_NAME") == "policy"


def test_gym_install_from_a_local_repository(cluster_run, tmp_path) -> None:
    """A cluster without internet: gym_install clones a local repository into a fresh venv."""
    repo = tmp_path / "gym-mirror"
    (repo / "fakegym").mkdir(parents=True)
    standin = (Path(__file__).resolve().parents[1] / "standins" / "gym").read_text()
    (repo / "fakegym" / "__init__.py").write_text("")
    (repo / "fakegym" / "cli.py").write_text(
        "import runpy, sys\n"
        f"STANDIN = {str(Path(__file__).resolve().parents[1] / 'standins' / 'gym')!r}\n"
        "def main():\n    sys.argv[0] = STANDIN\n    runpy.run_path(STANDIN, run_name='__main__')\n"
    )
    (repo / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "fakegym"\nversion = "0.0.1"\n[project.scripts]\ngym = "fakegym.cli:main"\n'
    )
    assert standin  # the installed `gym` runs the recording stand-in
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "mirror"], check=True)
    subprocess.run([*git, "tag", "v0.7.0"], check=True)
    python_bin = str(Path(sys.executable).resolve().parent)
    config = cluster_run.config(
        services={"policy": {"type": "vllm", "model": "m"}},
        driver={
            "policy_model": "policy",
            "gym_install": {"repo": str(repo), "ref": "v0.7.0"},
            "env": {"PATH": f"lit:{python_bin}:/usr/local/bin:/usr/bin:/bin"},
        },
    )
    [job] = cluster_run.submit(config)["benchmarks"]
    assert cluster_run.wait(job["job_id"], timeout=240)["JobState"] == "COMPLETED", (
        slurm_out(job) + Path(job["job_dir"], "logs", f"driver-{job['job_id']}.log").read_text()
    )
    [driver] = standin_records(job["job_dir"], "gym-run")
    assert "/gym-install-" in driver["cwd"]  # ran from the fresh clone


RAY_ENV = Path(os.environ.get("GYM_ENVS_DIR", Path.home() / ".cache" / "gym-orchestration" / "envs")) / "ray-serve"


def test_ray_gateway_serves_replicas_across_nodes_with_real_ray_and_starts_anew_for_each_checkpoint(
    cluster_run,
) -> None:
    """use_ray_serve: a real Ray cluster over two nodes, our gateway on the first, two replicas
    (stand-in vLLM: no GPU here) behind one endpoint, the driver talking to the gateway. Two
    checkpoints with job.deployment: reload are a restart lane (a gateway's weights cannot be
    switched in place): one allocation, the Ray cluster and the gateway started anew on the second
    checkpoint once the first's run has been served, each run answered through its own."""
    if not (RAY_ENV / "bin" / "ray").exists():
        reason = "no Ray environment (scripts/envs/ray-env.sh)"
        pytest.fail(reason) if os.environ.get("GYM_REQUIRE_CLUSTER") == "1" else pytest.skip(reason)
    path = f"lit:{RAY_ENV / 'bin'}:{Path(__file__).resolve().parents[1] / 'standins'}:/usr/local/bin:/usr/bin:/bin"
    config = cluster_run.config(
        services={
            "policy": {
                "type": "vllm",
                "model": "m",
                "served_model_name": "tiny",
                "use_ray_serve": True,
                "number_of_instances": 2,
                "health_check": {"timeout_seconds": 300},
                "env": {"PATH": path, "RAY_USAGE_STATS_ENABLED": "lit:0"},
            }
        },
        pools={"gpu": {"partition": "debug", "nodes": 2}},
        driver={"policy_model": "policy"},
        compute={"walltime": "00:10:00"},
    )
    config["job"]["deployment"] = "reload"
    proc = submit_sweep_cli(cluster_run, config, "services.policy.model=/ckpt/step-1,/ckpt/step-2")
    assert proc.returncode == 0 and "2 checkpoint run(s) in 1 restart lane(s)" in proc.stderr, proc.stderr
    records = json.loads(proc.stdout)["records"]
    [job_id] = {b["job_id"] for r in records for b in r["benchmarks"]}  # one allocation
    cluster_run.job_ids.append(job_id)
    lane = Path(records[0]["run_dir"], "shared-deployment")
    fields = cluster_run.wait(job_id, timeout=600)
    assert fields["JobState"] == "COMPLETED", Path(lane, f"slurm-{job_id}.out").read_text() + "".join(
        p.read_text()[-3000:] for p in Path(lane, "logs").glob("policy*") if p.is_file()
    )
    replicas = standin_records(str(lane), "vllm")
    assert sorted(r["argv"][1] for r in replicas) == ["/ckpt/step-1"] * 2 + ["/ckpt/step-2"] * 2
    for replica in replicas:
        assert "--distributed-executor-backend" in replica["argv"] and replica["env"].get("RAY_ADDRESS")
    for record in records:
        [bench] = record["benchmarks"]
        assert state_of(bench["job_dir"])["phase"] == "succeeded"
        [driver] = standin_records(bench["job_dir"], "gym-run")
        assert driver["policy_models"]["data"][0]["id"] == "tiny"  # through the gateway on port 8000
        assert driver["policy_models"]["data"][0]["standin_weights"] == record["model"]


def _ray_minimal_bin() -> Path:
    bin_dir = Path(os.environ.get("GYM_RAY_MINIMAL_BIN", ""))
    if not (bin_dir / "ray").exists():
        reason = "no Ray-without-dashboard environment (scripts/envs/ray-env.sh)"
        pytest.fail(reason) if os.environ.get("GYM_REQUIRE_CLUSTER") == "1" else pytest.skip(reason)
    return bin_dir


@pytest.mark.parametrize("shape", ["one vLLM instance across two nodes", "a ray service over two nodes"])
def test_a_ray_without_its_dashboard_joins_every_node(cluster_run, shape) -> None:
    """The real Ray a vLLM image carries: no dashboard, so no `ray list`. The step that runs one
    instance wider than a node, and a `type: ray` head with workers, still see every node join;
    every Ray client gets the job's token (Ray's heads ask for one)."""
    ray_bin = _ray_minimal_bin()
    path = f"lit:{ray_bin}:{Path(__file__).resolve().parents[1] / 'standins'}:/usr/local/bin:/usr/bin:/bin"
    env = {"PATH": path, "RAY_USAGE_STATS_ENABLED": "lit:0"}
    if shape.startswith("one vLLM"):
        services = {
            "policy": {
                "type": "vllm",
                "model": "big",
                "tensor_parallel_size": 4,
                "pipeline_parallel_size": 2,
                "env": env,
                "health_check": {"timeout_seconds": 240},
            }
        }
    else:
        services = {
            "policy": {"type": "vllm", "model": "m", "node_pool": "gpu", "env": dict(env)},
            "envs": {"type": "ray", "node_pools": ["gpu", "cpu"], "env": dict(env)},
        }
    config = cluster_run.config(
        services=services,
        pools={
            "gpu": {"partition": "debug", "nodes": 1 if "envs" in services else 2, "gpus_per_node": 4},
            **({"cpu": {"partition": "debug", "nodes": 1, "gpus_per_node": 4}} if "envs" in services else {}),
        },
        driver={"policy_model": "policy", "env": {"PATH": path, "RAY_ADDRESS": "runtime:GYM_RAY_ADDRESS_ENVS"}}
        if "envs" in services
        else {"policy_model": "policy"},
        compute={"container_runtime": "none", "walltime": "00:10:00"},
    )
    [job] = cluster_run.submit(config)["benchmarks"]
    fields = cluster_run.wait(job["job_id"], timeout=400)
    logs = "".join(p.read_text()[-2000:] for p in Path(job["job_dir"], "logs").glob("*"))
    assert fields["JobState"] == "COMPLETED", slurm_out(job) + logs
    commands = [
        line
        for p in Path(job["job_dir"], "steps").glob("*.sh")
        for line in p.read_text().splitlines()
        if not line.lstrip().startswith("#")
    ]
    assert not [line for line in commands if "ray list" in line]
    token = Path(job["job_dir"], ".gym", "ray.token")
    assert token.stat().st_mode & 0o777 == 0o600 and len(token.read_text()) == 64
    [driver] = standin_records(job["job_dir"], "gym-run")
    assert driver["env"]["RAY_AUTH_MODE"] == "token"  # the driver can reach the job's Ray clusters too
