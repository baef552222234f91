"""Which weights a warm lane's server holds, proven rather than assumed, and the switch to the next.

A warm lane (``job.deployment: reload``) keeps one vLLM server running across a sweep's
checkpoints and reloads its weights in place between runs. vLLM cannot say which weights it
holds after a reload (``/v1/models`` keeps the first checkpoint's name), so the job tracks it:
this program, run by the job between two runs (never while a request of either is in flight),

* ``answered``: whether every benchmark of the run before has written all the rows it was meant
  to (``facts.job_completeness``, the one reading of completeness): gym writes its rollouts once
  its last request is answered, then spends seconds writing metrics and stopping its own
  servers; the next run's weights need not wait for that (measured: about 6 s a run here);
* ``started``: records the weights the server started with (its command line's model);
* ``reload``: checks the next checkpoint against the loaded one (same architecture, shapes and
  tokenizer, read from its files) and that its weight files are whole, asks the server to
  reload (``POST /collective_rpc`` with the job's token, ``reload_guard``) and to drop its prefix
  cache (``POST /reset_prefix_cache``: cached blocks of a prompt seen before were computed by the
  old weights, and would answer it — measured: a sweep at temperature 0 scored the old
  checkpoint's way without it), checks it is healthy, and records the switch.

Each run's benchmarks get, in their provenance (``contract.PROVENANCE_FILE``): the path, a fingerprint of the weight files
(names, sizes and modification times: cheap on a 100 GB checkpoint, and any rewrite changes
it), when they were loaded and how. Exit statuses (``contract.Reload``) tell the job what follows: a
checkpoint refused before the server was touched leaves the lane going on with the weights it
had; a server that failed mid-reload holds weights nobody can name, and serves no more runs.

Stdlib only: it runs on the node, shipped with the job (``shipping.Program.WEIGHTS``). HTTP
(``urllib``) is imported where the server is asked. The lane's decider (``shared_queue``) reads
the exit statuses from ``contract``, without this module.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import struct
import sys
import time
from typing import Any

from nemo_gym.orchestration import contract, facts
from nemo_gym.orchestration.contract import Reload
from nemo_gym.orchestration.reload_guard import TOKEN_HEADER

# What must agree between two checkpoints for one to be loaded over the other in place.
SHAPE_KEYS = (
    "architectures",
    "model_type",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "vocab_size",
    "tie_word_embeddings",
)
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
)
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt")
# Each switch, in the provenance of the run's benchmarks: key -> the record's field.
PROVENANCE_KEYS = (
    ("weights", "path"),
    ("weights.fingerprint", "fingerprint"),
    ("weights.loaded_at", "loaded_at"),
    ("weights.how", "how"),
)
RESET_TRIES = 20
MAX_FILES = 20000  # a checkpoint with more files than this is not fingerprinted whole
MAX_CONFIG_BYTES = 1 << 20
MAX_TOKENIZER_BYTES = 256 << 20
MAX_HEADER_BYTES = 100 << 20  # a safetensors header larger than this is not a header


class Refused(Exception):
    """The checkpoint is refused, with the one line that says why."""


def fingerprint(path: str) -> str:
    """A digest of the checkpoint directory's files: relative names, sizes, modification times."""
    lines: list[str] = []
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(root, name)
            try:
                st = os.stat(full)
            except OSError:
                continue
            lines.append(f"{os.path.relpath(full, path)}\t{st.st_size}\t{st.st_mtime_ns}\n")
            if len(lines) > MAX_FILES:
                raise Refused(f"{path} holds more than {MAX_FILES} files: is it a checkpoint directory?")
    return "sha256:" + hashlib.sha256("".join(lines).encode("utf-8", "surrogateescape")).hexdigest()


def shape(path: str) -> dict[str, Any]:
    """What of the checkpoint must match the loaded one: its config's shape and its tokenizer."""
    config_path = os.path.join(path, "config.json")
    try:
        with open(config_path, "rb") as fh:
            config = json.loads(fh.read(MAX_CONFIG_BYTES + 1)[: MAX_CONFIG_BYTES + 1])
    except OSError as e:
        raise Refused(f"{config_path} cannot be read ({e.strerror or e})") from None
    except ValueError:
        raise Refused(f"{config_path} is not JSON") from None
    if not isinstance(config, dict):
        raise Refused(f"{config_path} is not a JSON object")
    found = {key: config.get(key) for key in SHAPE_KEYS}
    found["tokenizer"] = _tokenizer_digest(path)
    return found


def _tokenizer_digest(path: str) -> str:
    digest = hashlib.sha256()
    for name in TOKENIZER_FILES:
        try:
            with open(os.path.join(path, name), "rb") as fh:
                data = fh.read(MAX_TOKENIZER_BYTES)
        except OSError:
            continue
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return "sha256:" + digest.hexdigest()


def check_weight_files(path: str) -> None:
    """Refuse a checkpoint without weight files, or with a safetensors file whose header is not whole."""
    try:
        names = sorted(os.listdir(path))
    except OSError as e:
        raise Refused(f"{path} cannot be listed ({e.strerror or e})") from None
    weights = [name for name in names if name.endswith(WEIGHT_SUFFIXES)]
    if not weights:
        raise Refused(f"{path} holds no weight files ({', '.join('*' + s for s in WEIGHT_SUFFIXES)})")
    for name in weights:
        if name.endswith(".safetensors"):
            _check_safetensors(os.path.join(path, name))


def _check_safetensors(path: str) -> None:
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as fh:
            head = fh.read(8)
            if len(head) < 8:
                raise Refused(f"{path} is truncated (no safetensors header)")
            (length,) = struct.unpack("<Q", head)
            if length > MAX_HEADER_BYTES or 8 + length > size:
                raise Refused(f"{path} is not a whole safetensors file (header of {length} bytes in a file of {size})")
            header = json.loads(fh.read(length))
    except OSError as e:
        raise Refused(f"{path} cannot be read ({e.strerror or e})") from None
    except ValueError:
        raise Refused(f"{path} has a safetensors header that is not JSON") from None
    if not isinstance(header, dict):
        raise Refused(f"{path} has a safetensors header that is not a JSON object")
    ends = [entry.get("data_offsets", [0, 0])[1] for entry in header.values() if isinstance(entry, dict)]
    if ends and 8 + length + max(int(end) for end in ends) > size:
        raise Refused(f"{path} is truncated (its tensors end past the file)")


def mismatch(loaded: dict[str, Any], candidate: dict[str, Any]) -> str | None:
    """Why ``candidate`` cannot replace ``loaded`` in place, or None when it can."""
    for key in (*SHAPE_KEYS, "tokenizer"):
        if loaded.get(key) != candidate.get(key):
            return f"its {key} is {candidate.get(key)!r} where the loaded checkpoint's is {loaded.get(key)!r}"
    return None


def record(dirs: list[str], loaded_file: str, entry: dict[str, Any]) -> None:
    """What the server now holds: the job's own record, and each of the run's benchmarks'
    provenance (``weights=``, ``weights.fingerprint=``, ...: what gym eval info and results show)."""
    _write_json(loaded_file, entry)
    lines = "".join(f"{key}={_one_line(entry[field])}\n" for key, field in PROVENANCE_KEYS)
    for directory in dirs:
        path = os.path.join(directory, contract.PROVENANCE_FILE)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(lines)


def _one_line(value: Any) -> str:
    return "".join(ch for ch in str(value) if ch.isprintable())[:200]


def _write_json(path: str, data: dict[str, Any]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    partial = f"{path}.partial"
    with open(partial, "w", encoding="utf-8") as fh:
        json.dump(data, fh, sort_keys=True)
        fh.write("\n")
    os.replace(partial, path)  # a reader never sees half a record


def read_loaded(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as fh:
        data = json.loads(fh.read(MAX_CONFIG_BYTES))
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    return data


def post_reload(url: str, token: str, weights: str, timeout: float) -> None:
    """Ask the server to load ``weights`` in place, then to drop its prefix cache (its blocks
    were computed by the old weights: a prompt seen before would be answered from them); raise
    OSError with why it did not."""
    body = {"method": "reload_weights", "kwargs": {"weights_path": weights, "is_checkpoint_format": True}}
    _post(f"{url}/collective_rpc", token, body, timeout)
    for _ in range(RESET_TRIES):  # vLLM refuses while blocks are still held; callers may retry
        if _post(f"{url}/reset_prefix_cache", token, None, 60).get("success") is True:
            return
        time.sleep(0.5)
    raise OSError(f"reset_prefix_cache: the server did not drop its prefix cache in {RESET_TRIES} tries")


def _post(url: str, token: str, body: Any, timeout: float) -> dict[str, Any]:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode() if body is not None else b"",
        headers={"Content-Type": "application/json", TOKEN_HEADER: token},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            text = answer.read(1 << 16)
    except urllib.error.HTTPError as e:
        said = e.read(300).decode("utf-8", "replace").replace("\n", " ")
        raise OSError(f"{url.rsplit('/', 1)[-1]}: the server answered {e.code} ({said})") from None
    try:
        answered = json.loads(text or b"{}")
    except ValueError:
        return {}
    return answered if isinstance(answered, dict) else {}


def healthy(url: str, timeout: float) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"{url}/health", timeout=timeout) as answer:
            return answer.status == 200
    except OSError:
        return False


def _entry(weights: str, how: str, seconds: float, found: dict[str, Any]) -> dict[str, Any]:
    return {
        "path": weights,
        "fingerprint": fingerprint(weights),
        "loaded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "how": how,
        "seconds": round(seconds, 3),
        "shape": found,
    }


def started(args: argparse.Namespace) -> Reload:
    """The server holds the weights it was started with."""
    try:
        record(args.dirs, args.loaded, _entry(args.weights, "started", 0.0, shape(args.weights)))
    except Refused as e:
        # The server started on them, so they load: only their record is missing.
        _say(f"the starting weights could not be described: {e}")
        record(args.dirs, args.loaded, {**_entry(args.weights, "started", 0.0, {}), "shape": None})
    return Reload.LOADED


def reload(args: argparse.Namespace) -> Reload:
    """Switch the server to ``args.weights``, or say why not."""
    try:
        loaded = read_loaded(args.loaded)
        candidate = shape(args.weights)
        why = mismatch(loaded.get("shape") or {}, candidate) if loaded.get("shape") else None
        if why:
            raise Refused(f"{args.weights} cannot replace {loaded.get('path')} in place: {why}")
        check_weight_files(args.weights)
        with open(args.token_file, encoding="ascii") as fh:
            token = fh.read(256).strip()
    except Refused as e:
        _say(str(e))
        return Reload.REFUSED
    except (OSError, ValueError) as e:
        _say(f"the lane's own records cannot be read: {e}")
        return Reload.FAILED
    began = time.monotonic()
    try:
        post_reload(args.url, token, args.weights, args.timeout)
    except OSError as e:
        _say(f"the server failed to load {args.weights}: {e}")
        return Reload.FAILED
    if not healthy(args.url, 30):
        _say(f"the server is not healthy after loading {args.weights}")
        return Reload.FAILED
    record(args.dirs, args.loaded, _entry(args.weights, "reloaded", time.monotonic() - began, candidate))
    return Reload.LOADED


def answered(dirs: list[str]) -> bool:
    """Whether each benchmark directory holds every row it expects: its driver asks the server
    nothing more. Unknown completeness (no list of expected rows) is not an answer: wait for the
    driver to end."""
    return all(facts.job_completeness(d)[0].complete is True for d in dirs)


def _say(line: str) -> None:
    print(f"weights: {line}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="weights", description=__doc__.split("\n", 1)[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    for verb in ("started", "reload"):
        sub = verbs.add_parser(verb)
        sub.add_argument("--weights", required=True)
        sub.add_argument("--loaded", required=True, help="the job's record of what the server holds")
        sub.add_argument("--url", default="", help="the server, http://host:port (reload)")
        sub.add_argument("--token-file", default="", help="the job's reload token (reload)")
        sub.add_argument("--timeout", type=float, default=1800.0)
        sub.add_argument("dirs", nargs="*", help="the run's benchmark directories")
    done = verbs.add_parser("answered", help="exit 0 when every directory holds all its expected rows")
    done.add_argument("dirs", nargs="+", help="the benchmark directories of the run before")
    args = parser.parse_args(argv)
    if args.verb == "answered":
        return 0 if answered(args.dirs) else 1
    return int(started(args) if args.verb == "started" else reload(args))


if __name__ == "__main__":
    sys.exit(main())
