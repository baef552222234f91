"""A warm lane's weights switch (weights.py), as the job runs it: the checks before a reload
(shape, tokenizer, whole weight files), the reload itself against a small HTTP server that answers
as vLLM's /collective_rpc does, and what each outcome's exit status and records are."""

from __future__ import annotations

import json
import os
import struct
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from nemo_gym.orchestration import contract, weights
from nemo_gym.orchestration.reload_guard import TOKEN_HEADER
from nemo_gym.orchestration.weights import Reload

CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "vocab_size": 128}
TOKEN = "s3cret"


def checkpoint(root: Path, name: str, config: dict = CONFIG, payload: bytes = b"\0" * 8, tokenizer: str = "{}") -> str:
    path = root / name
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps(config))
    (path / "tokenizer.json").write_text(tokenizer)
    header = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
    (path / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + payload)
    return str(path)


class Server:
    """Answers /collective_rpc and /reset_prefix_cache as vLLM does (200, or ``status``; the reset's
    ``success`` from ``reset`` in turn, then true), /health 200; keeps what it was asked."""

    def __init__(self, status: int = 200, reset: list[bool] | None = None) -> None:
        self.status, self.asked, self.reset = status, [], list(reset or [])
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                owner.asked.append((self.path, self.headers.get(TOKEN_HEADER), body))
                self.send_response(owner.status)
                self.end_headers()
                if owner.status != 200:
                    self.wfile.write(b"engine error")
                elif self.path == "/reset_prefix_cache":
                    self.wfile.write(json.dumps({"success": owner.reset.pop(0) if owner.reset else True}).encode())
                else:
                    self.wfile.write(b'{"results": [null]}')

            def do_GET(self) -> None:
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture
def lane(tmp_path: Path):
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    bench = tmp_path / "run-b" / "math"
    first = checkpoint(tmp_path, "step-0")
    loaded = str(tmp_path / "job" / contract.LOADED_WEIGHTS_FILE)
    assert weights.main(["started", "--weights", first, "--loaded", loaded, str(tmp_path / "run-a" / "math")]) == 0
    return tmp_path, loaded, str(token), str(bench)


def reload(lane, server: Server, path: str) -> int:
    _, loaded, token, bench = lane
    return weights.main(
        ["reload", "--url", server.url, "--token-file", token, "--weights", path, "--loaded", loaded, bench]
    )


def provenance(directory: str) -> dict[str, str]:
    path = Path(directory, contract.PROVENANCE_FILE)
    return dict(line.split("=", 1) for line in path.read_text().splitlines()) if path.exists() else {}


def test_a_reload_asks_the_server_with_the_job_s_token_and_records_the_weights(lane) -> None:
    server = Server()
    nxt = checkpoint(lane[0], "step-100")
    assert reload(lane, server, nxt) == Reload.LOADED
    (path, token, body), (reset, reset_token, _) = server.asked
    assert (path, token) == ("/collective_rpc", TOKEN)
    assert body == {"method": "reload_weights", "kwargs": {"weights_path": nxt, "is_checkpoint_format": True}}
    # Then the prefix cache goes: its blocks were computed by the old weights.
    assert (reset, reset_token) == ("/reset_prefix_cache", TOKEN)
    said = provenance(lane[3])
    assert said["weights"] == nxt and said["weights.how"] == "reloaded"
    assert said["weights.fingerprint"] == weights.fingerprint(nxt)
    assert json.loads(Path(lane[1]).read_text())["path"] == nxt  # the job's own record: what it holds now
    assert provenance(str(lane[0] / "run-a" / "math"))["weights.how"] == "started"


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (lambda root: checkpoint(root, "other", {**CONFIG, "hidden_size": 96}), "hidden_size"),
        (lambda root: checkpoint(root, "other", {**CONFIG, "architectures": ["Qwen2ForCausalLM"]}), "architectures"),
        (lambda root: checkpoint(root, "other", tokenizer='{"added": 1}'), "tokenizer"),
        (lambda root: checkpoint(root, "other", payload=b"\0" * 3), "truncated"),
        (lambda root: str(root / "missing"), "cannot be read"),
    ],
)
def test_a_checkpoint_that_cannot_replace_the_loaded_one_is_refused_without_touching_the_server(
    lane, make, why, capsys
) -> None:
    server = Server()
    assert reload(lane, server, make(lane[0])) == Reload.REFUSED
    assert server.asked == []
    assert why in capsys.readouterr().err
    assert provenance(lane[3]) == {}


def test_a_checkpoint_without_weight_files_is_refused(lane, capsys) -> None:
    path = checkpoint(lane[0], "empty")
    os.remove(Path(path, "model.safetensors"))
    assert reload(lane, Server(), path) == Reload.REFUSED
    assert "no weight files" in capsys.readouterr().err


def test_a_server_that_fails_the_reload_leaves_weights_nobody_can_name(lane, capsys) -> None:
    server = Server(status=500)
    assert reload(lane, server, checkpoint(lane[0], "step-100")) == Reload.FAILED
    assert "collective_rpc: the server answered 500 (engine error)" in capsys.readouterr().err
    assert provenance(lane[3]) == {}
    assert json.loads(Path(lane[1]).read_text())["how"] == "started"  # never claimed as loaded


def test_a_prefix_cache_still_held_is_asked_again_and_one_never_dropped_fails_the_lane(lane, monkeypatch) -> None:
    monkeypatch.setattr(weights.time, "sleep", lambda _: None)
    server = Server(reset=[False, False])
    assert reload(lane, server, checkpoint(lane[0], "step-100")) == Reload.LOADED
    assert [path for path, _, _ in server.asked].count("/reset_prefix_cache") == 3
    stuck = Server(reset=[False] * weights.RESET_TRIES)
    assert reload(lane, stuck, checkpoint(lane[0], "step-200")) == Reload.FAILED


def test_the_fingerprint_follows_every_rewrite_of_a_weight_file(tmp_path) -> None:
    path = checkpoint(tmp_path, "step-0")
    before = weights.fingerprint(path)
    assert weights.fingerprint(path) == before
    target = Path(path, "model.safetensors")
    os.utime(target, ns=(0, target.stat().st_mtime_ns + 1))
    assert weights.fingerprint(path) != before


def bench_dir(root: Path, expected: int, written: list[str]) -> str:
    """A benchmark directory whose gym expects ``expected`` rows (one task each) and wrote ``written`` lines."""
    (root / "artifacts").mkdir(parents=True)
    inputs = [json.dumps({"_ng_task_index": i, "_ng_rollout_index": 0}) for i in range(expected)]
    (root / contract.MATERIALIZED_INPUTS_FILE).write_text("\n".join(inputs) + "\n")
    if written:
        (root / contract.ROLLOUTS_FILE).write_text("".join(written))
    return str(root)


def row(task: int) -> str:
    return json.dumps({"_ng_task_index": task, "_ng_rollout_index": 0, "reward": 1.0}) + "\n"


@pytest.mark.parametrize(
    ("lines", "answered"),
    [
        ([row(0), row(1), row(2)], True),
        ([row(2), row(0), row(1), row(1)], True),  # order and a duplicate change nothing
        ([row(0), row(1)], False),  # a request still to come
        ([row(0), row(1), row(2)[:20]], False),  # the last row half written
        ([], False),  # no rollouts yet
    ],
)
def test_a_run_is_answered_once_every_benchmark_wrote_every_row_it_expects(tmp_path, lines, answered) -> None:
    done = bench_dir(tmp_path / "a", 3, [row(0), row(1), row(2)])
    other = bench_dir(tmp_path / "b", 3, lines)
    assert weights.main(["answered", done, other]) == (0 if answered else 1)
    assert weights.main(["answered", done]) == 0


def test_a_benchmark_whose_expected_rows_are_unknown_is_never_answered_early(tmp_path) -> None:
    done = bench_dir(tmp_path / "a", 2, [row(0), row(1)])
    os.remove(Path(done) / contract.MATERIALIZED_INPUTS_FILE)
    assert weights.main(["answered", done]) == 1
    (Path(done) / contract.MATERIALIZED_INPUTS_FILE).write_text("not json\n")
    assert weights.main(["answered", done]) == 1
