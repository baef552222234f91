"""Prefill/decode on the real local Slurm cluster: the tiers are the recording stand-in `vllm`
(NIXL's transfer needs GPUs), the router is the real vllm-router, and a request really goes
driver -> router -> both tiers. Beside it, a `command` benchmark and a `gym eval run` one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import STANDIN_PATH, standin_records, state_of

pytestmark = [pytest.mark.slow, pytest.mark.cluster]

# The command benchmark: a chat request through the router (the policy endpoint it is told), its
# answer kept, and text with both kinds of quotes that must arrive as written.
COMMAND = """\
curl -sf -H 'content-type: application/json' \\
    -d '{"model": "'"$NEMO_GYM_POLICY_MODEL_NAME"'", "messages": [{"role": "user", "content": "hi"}]}' \\
    "$NEMO_GYM_POLICY_BASE_URL/chat/completions" > "$NEMO_GYM_BENCH_DIR/artifacts/answer.json"
echo "it's \\"quoted\\"; 'both' ways" > "$NEMO_GYM_BENCH_DIR/artifacts/said.txt"
env | grep '^NEMO_GYM_' | sort > "$NEMO_GYM_BENCH_DIR/artifacts/env.txt"
"""


def requests_of(job_dir: str, host: str, port: int) -> list[dict]:
    path = Path(job_dir, "standin", f"requests-{host}-{port}.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_prefill_decode_behind_the_real_router_with_a_command_and_a_gym_benchmark(cluster_run, router_bin) -> None:
    config = cluster_run.config(
        services={
            "policy": {
                "type": "vllm_pd",
                "model": "/models/tiny",
                "served_model_name": "tiny",
                "env": {"PATH": STANDIN_PATH, "GYM_ROUTER_BIN": f"lit:{router_bin}", "HF_TOKEN": "lit:tier-secret"},
                "prefill": {"node_pool": "prefill"},
                "decode": {"node_pool": "decode", "number_of_instances": 2},
            }
        },
        pools={
            "prefill": {"partition": "debug", "nodes": 1, "gpus_per_node": 4},
            "decode": {"partition": "debug", "nodes": 2, "gpus_per_node": 4},
        },
        benchmarks={"gym-run": {"run": {"limit": 2}}, "scripted": {"command": COMMAND}},
        driver={"policy_model": "policy", "policy_host": "${oc.env:HEAD_NODE_IP}"},
    )
    record = cluster_run.submit(config, "--json")
    jobs = {b["benchmark"]: b for b in record["benchmarks"]}
    for job in jobs.values():
        fields = cluster_run.wait(job["job_id"], timeout=180)
        log = Path(job["job_dir"], f"slurm-{job['job_id']}.out").read_text()
        assert fields["JobState"] == "COMPLETED", log
        assert state_of(job["job_dir"])["phase"] == "succeeded", log
        vllm = {
            (r["host"], "--headless" in r["argv"]): r
            for r in standin_records(job["job_dir"], "vllm")
            if r["tool"] == "vllm"
        }  # not vllm-router's
        assert set(vllm) == {("n1", False), ("n2", False), ("n3", True)}  # prefill on n1; decode n2 head, n3 headless
        prefill, decode, headless = vllm[("n1", False)], vllm[("n2", False)], vllm[("n3", True)]
        for tier, role, port, side_channel in (
            (prefill, "kv_producer", "8001", "5600"),
            (decode, "kv_consumer", "8002", "5601"),
            (headless, "kv_consumer", "8002", "5601"),
        ):
            argv = tier["argv"]
            assert argv[argv.index("--port") + 1] == port
            assert json.loads(argv[argv.index("--kv-transfer-config") + 1])["kv_role"] == role  # one argument
            assert tier["env"]["VLLM_NIXL_SIDE_CHANNEL_PORT"] == side_channel
            assert tier["env"]["VLLM_NIXL_SIDE_CHANNEL_HOST"].startswith("198.18.0.")  # the node's own address
            assert tier["env"]["HF_TOKEN"].startswith(
                "sha256:"
            )  # the service's env reached the tier (0.7.0: router only)
        assert prefill["env"]["VLLM_NIXL_SIDE_CHANNEL_HOST"] != decode["env"]["VLLM_NIXL_SIDE_CHANNEL_HOST"]
        decode_head_ip = decode["argv"][decode["argv"].index("--data-parallel-address") + 1]
        assert (
            headless["argv"][headless["argv"].index("--data-parallel-address") + 1] == decode_head_ip
        )  # not empty (0.7.0's B1)
        assert decode["argv"][decode["argv"].index("--data-parallel-rpc-port") + 1] == "13346"  # prefill's + 1
        [router] = standin_records(job["job_dir"], "vllm-router")
        argv = router["argv"]
        assert router["host"] == "n1" and argv[argv.index("--port") + 1] == "8000"
        assert argv[argv.index("--prefill") + 1] == f"http://{prefill['env']['VLLM_NIXL_SIDE_CHANNEL_HOST']}:8001"
        assert argv[argv.index("--decode") + 1] == f"http://{decode_head_ip}:8002"
        assert "--vllm-pd-disaggregation" in argv and argv.count("--prefill") == argv.count("--decode") == 1
    [driver] = standin_records(jobs["gym-run"]["job_dir"], "gym-run")
    base = driver["overrides"]["policy_base_url"]
    assert base.startswith("http://198.18.0.") and base.endswith(":8000/v1")  # HEAD_NODE_IP, read on the node
    assert driver["policy_models"]["data"][0]["id"] == "tiny"  # answered through the router
    scripted = Path(jobs["scripted"]["job_dir"], "artifacts")
    answer = json.loads((scripted / "answer.json").read_text())
    assert answer["choices"][0]["message"]["content"] == "42"
    assert (scripted / "said.txt").read_text() == "it's \"quoted\"; 'both' ways\n"
    told = dict(line.split("=", 1) for line in (scripted / "env.txt").read_text().splitlines())
    assert told["NEMO_GYM_BENCH_DIR"] == jobs["scripted"]["job_dir"] and told["NEMO_GYM_POLICY_MODEL_NAME"] == "tiny"
    # The request really went through both tiers: prefill first (one token, KV handed on), then decode.
    job_dir = jobs["scripted"]["job_dir"]
    [to_prefill] = [r for r in requests_of(job_dir, "n1", 8001) if r["path"] == "/v1/chat/completions"]
    [to_decode] = [r for r in requests_of(job_dir, "n2", 8002) if r["path"] == "/v1/chat/completions"]
    assert to_prefill["body"]["max_tokens"] == 1 and to_prefill["body"]["kv_transfer_params"]["do_remote_decode"]
    assert "kv_transfer_params" not in to_decode["body"] or not to_decode["body"]["kv_transfer_params"].get(
        "do_remote_decode"
    )
