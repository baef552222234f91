"""The projection run where the files lie (rollout_projection.py) changes nothing the readers see:
parse_rollouts and parse_expected give the same answer on the projected lines as on the file."""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
import zlib
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from nemo_gym.orchestration import rollout_projection
from nemo_gym.orchestration.results import projection_source
from nemo_gym.orchestration.rollouts import parse_expected, parse_rollouts

INDEX = st.one_of(st.integers(-2, 5), st.just(True), st.just(2.0), st.just("1"), st.none())
SCORE = st.one_of(
    st.integers(-(10**30), 10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.text(max_size=3),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.just("reward"), st.floats(0, 1)),
)


@st.composite
def rollout_line(draw: Any) -> str:
    kind = draw(st.sampled_from(["row", "row", "row", "blank", "garbage", "truncated", "nested", "array"]))
    if kind == "blank":
        return draw(st.sampled_from(["", "  ", "\r"]))
    if kind == "garbage":
        return draw(st.text(max_size=20).filter(lambda t: "\n" not in t))
    if kind == "array":
        return "[1, 2]"
    row: dict[str, Any] = {}
    if draw(st.booleans()):
        row["_ng_task_index"] = draw(INDEX)
    if draw(st.booleans()) or kind == "row":
        row["_ng_rollout_index"] = draw(INDEX)
    if kind == "nested":
        row["response"] = {"reward": draw(SCORE)}
    elif draw(st.booleans()):
        row["reward"] = draw(SCORE)
    row["text"] = draw(st.text(max_size=10))  # raw U+2028 and friends: JSON keeps them in strings
    text = json.dumps(row, ensure_ascii=False)
    return text[: draw(st.integers(1, len(text)))] if kind == "truncated" else text


def projected(lines: list[str], metric: str) -> list[str]:
    return [rollout_projection.project_line(line, metric) for line in lines]


@settings(max_examples=300)
@given(st.lists(rollout_line(), max_size=12), st.sampled_from(["reward", "response.reward", "text"]))
def test_parse_rollouts_sees_the_same_on_projected_lines(lines: list[str], metric: str) -> None:
    assert parse_rollouts(projected(lines, metric), metric) == parse_rollouts(lines, metric)


@settings(max_examples=200)
@given(st.lists(rollout_line(), max_size=8))
def test_parse_expected_sees_the_same_on_projected_lines(lines: list[str]) -> None:
    def outcome(given_lines: list[str]) -> object:
        try:
            return parse_expected(given_lines)
        except ValueError as exc:
            return str(exc)

    assert outcome(projected(lines, "")) == outcome(lines)


def test_the_whole_file_round_trip_splits_at_newlines_only(tmp_path: Path) -> None:
    rows = [{"_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1, "text": "a\u2028b\x85c"}, {"bad": 1}]
    text = "\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n\n" + '{"_ng_task_index": 1, "_ng'
    path = tmp_path / "rollouts.jsonl"
    path.write_bytes(text.encode() + b"\xff\n")
    out = io.StringIO()
    with redirect_stdout(out):
        rollout_projection.main(["M:", "reward", "bench", str(path), str(tmp_path / "none")])
    [line] = out.getvalue().splitlines()
    bench, part, encoding, names, payload = line[len("M:") :].split("\x1f")
    assert (bench, part, encoding, names) == ("bench", "rollouts", "z", "reward")
    lines = zlib.decompress(base64.b64decode(payload)).decode().split("\n")
    file_lines = path.read_bytes().decode("utf-8", "replace").split("\n")
    assert len(lines) == len(file_lines) == 5
    assert parse_rollouts(lines) == parse_rollouts(file_lines)
    assert dict(parse_rollouts(lines).rewards) == {(0, 0): 1.0} and parse_rollouts(lines).unreadable == 2


def test_it_fits_in_one_argument_of_python3_c() -> None:
    """Sent as ``python3 -c PROGRAM``: Linux takes no argument longer than 128 KiB (MAX_ARG_STRLEN).
    Its modules' Python 3.8 and stdlib are tests/unit/test_shipping.py's."""
    assert len(projection_source().encode()) < 64 * 1024


def test_run_by_python3_c_it_imports_nothing_from_the_directory_it_runs_in(tmp_path: Path) -> None:
    for trap in ("contract", "untrusted", "facts"):
        (tmp_path / f"{trap}.py").write_text("raise SystemExit('imported from the working directory')\n")
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_text(json.dumps({"_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1}) + "\n")
    args = ["M:", "reward", "bench", str(rollouts), str(tmp_path / "none")]
    done = subprocess.run(
        [sys.executable, "-c", projection_source(), *args], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("M:bench\x1frollouts\x1fz\x1freward\x1f")


# -- reading lines: linear, bounded, and the same as splitting the whole file -----------------------


class Chunked(io.RawIOBase):
    """A file whose reads return the chunk sizes hypothesis drew (a pipe or a network filesystem
    returns short reads): the splitter must not depend on where a read ends."""

    def __init__(self, data: bytes, sizes: list[int]) -> None:
        self.data, self.sizes, self.at = data, sizes, 0

    def read(self, n: int = -1) -> bytes:
        size = self.sizes.pop(0) if self.sizes else n
        piece = self.data[self.at : self.at + max(1, min(size, n if n > 0 else size))]
        self.at += len(piece)
        return piece


def split_reference(data: bytes, limit: int) -> list[bytes | None]:
    return [None if len(line) > limit else line for line in data.split(b"\n")]


@settings(max_examples=400)
@given(
    st.lists(st.binary(max_size=12).map(lambda b: b.replace(b"\n", b"")), max_size=10),
    st.lists(st.integers(1, 9), max_size=30),
    st.integers(1, 8),
    st.integers(0, 10),
)
def test_lines_are_the_files_split_at_newlines_whatever_the_reads_return(
    lines: list[bytes], sizes: list[int], block: int, limit: int
) -> None:
    data = b"\n".join(lines)
    got = list(rollout_projection.lines_of(Chunked(data, list(sizes)), limit=limit, block_bytes=block))
    assert got == split_reference(data, limit)


def test_a_line_over_the_bound_is_one_oversized_row_naming_its_line(tmp_path: Path) -> None:
    good = json.dumps({"_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1})
    path = tmp_path / "rollouts.jsonl"
    other = json.dumps({"_ng_task_index": 1, "_ng_rollout_index": 0, "reward": 0})
    path.write_bytes(f"{good}\n{'x' * 3000}\n{other}".encode())
    with path.open("rb") as fh:
        assert [line is None for line in rollout_projection.lines_of(fh, limit=1000, block_bytes=256)] == [
            False,
            True,
            False,
        ]
    lines = [
        rollout_projection.project_line(None if len(raw) > 1000 else raw.decode(), "reward")
        for raw in path.read_bytes().split(b"\n")
    ]
    rs = parse_rollouts(lines)
    assert (rs.unreadable, rs.unreadable_lines, rs.oversized, rs.oversized_lines) == (1, (2,), 1, (2,))
    assert dict(rs.rewards) == {(0, 0): 1.0, (1, 0): 0.0}


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(["[", '{"a":']), st.integers(10_000, 200_000))
def test_json_nested_past_the_parsers_stack_is_one_unreadable_row(opener: str, depth: int) -> None:
    line = opener * depth
    assert rollout_projection.project_line(line, "reward") == rollout_projection.UNREADABLE
    assert rollout_projection.numeric_keys(line) == []
    rs = parse_rollouts([line, json.dumps({"_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1})])
    assert rs.unreadable_lines == (1,) and dict(rs.rewards) == {(0, 0): 1.0}


HOSTILE_LINE = st.one_of(
    rollout_line(),
    st.binary(max_size=30).map(lambda b: b.replace(b"\n", b"").decode("latin-1")),
    st.integers(1, 3000).map(lambda n: "[" * n),
    st.integers(1, 3000).map(lambda n: '{"_ng_task_index": 0, "x": ' + "[" * n + "]" * n + "}"),
    st.sampled_from(['{"_ng_task_index": 1, "_ng_rollout_index": 0, "reward": NaN}', "null", "[1,2]", "\ufeff{}"]),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(HOSTILE_LINE, max_size=8), st.binary(max_size=8))
def test_hostile_files_read_the_same_projected_or_whole_and_never_raise(lines: list[str], junk: bytes) -> None:
    import tempfile

    from nemo_gym.orchestration.results import _decoded_lines, _Found, benchmark_result

    data = "\n".join(lines).encode("utf-8", "surrogateescape") + junk
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rollouts.jsonl"
        path.write_bytes(data)
        _names, packed = rollout_projection.project_file(str(path), "reward")
    projected = _decoded_lines("z", base64.b64encode(packed).decode())
    whole = _decoded_lines("raw", base64.b64encode(data).decode())
    assert parse_rollouts(projected) == parse_rollouts(whole)
    for found in (
        _Found(files=["m"], rollout_lines=projected, expected_lines=projected),
        _Found(files=["m"], rollout_lines=whole, expected_lines=None),
    ):
        result = benchmark_result("b", None, found, "reward")
        assert result.complete is False and json.dumps(result.as_dict(), allow_nan=False)


def test_one_call_serves_several_runs_each_after_its_marker(tmp_path: Path) -> None:
    paths = []
    for run in (0, 1):
        path = tmp_path / f"r{run}.jsonl"
        path.write_text(json.dumps({"_ng_task_index": run, "_ng_rollout_index": 0, "reward": run}) + "\n")
        paths.append(str(path))
    out = io.StringIO()
    with redirect_stdout(out):
        rollout_projection.main(
            ["M:", "reward", "=RUN:0", "math", paths[0], str(tmp_path / "none"), "=RUN:1", "math", paths[1], "x"]
        )
    lines = out.getvalue().splitlines()
    assert [line[:12] for line in lines] == ["RUN:0", "M:math\x1frollo", "RUN:1", "M:math\x1frollo"]
    assert parse_rollouts(
        zlib.decompress(base64.b64decode(lines[3].split("\x1f")[-1])).decode().split("\n")
    ).rewards == {(1, 0): 1.0}


@settings(max_examples=200)
@given(st.lists(rollout_line(), max_size=8))
def test_the_inputs_digest_is_the_same_from_projected_lines_as_from_the_rows(lines: list[str]) -> None:
    from nemo_gym.orchestration.facts import inputs_digest

    cut = [rollout_projection.project_line(line, "", digest=True) for line in lines]
    assert inputs_digest(cut) == inputs_digest(lines)
    assert parse_expected_or_why(cut) == parse_expected_or_why(lines)


def parse_expected_or_why(lines: list[str]) -> object:
    try:
        return parse_expected(lines)
    except ValueError as exc:
        return str(exc)
