"""Reading what a run directory, a record or the index holds: data that anyone may have written.

Everything read back is bounded (size, nesting depth, encoding) and refused whole, with one line
that says which file and why, when it is not what a reader expects. Stdlib only, Python 3.8: the
exporters stage this module into jobs beside ``contract.py``.
"""

import json
import os
import stat

# Deeper than any file we write (our deepest is a few levels); far below Python's recursion limit,
# so no reader that walks a parsed document recursively can overflow the stack.
MAX_DEPTH = 64
# A record, a state file, a receipt or the metrics of one benchmark: kilobytes when we write them.
MAX_DOCUMENT_BYTES = 16 * 1024 * 1024


class Unreadable(ValueError):
    """A file (or an answer) that is not what its reader expects; the message is one line."""


def decode(data, what):
    """``data`` as text, refusing bytes that are not UTF-8 (rather than guessing at them)."""
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise Unreadable(f"{what}: not UTF-8 text (byte {err.start})") from None


def loads(data, what, max_depth=MAX_DEPTH):
    """Parse one JSON document; anything malformed, too deep or not UTF-8 is ``Unreadable``."""
    text = decode(data, what)
    try:
        value = json.loads(text)
    except RecursionError:
        raise Unreadable(f"{what}: JSON nested deeper than {max_depth} levels") from None
    except ValueError as err:
        raise Unreadable(f"{what}: not JSON ({one_line(str(err))})") from None
    if depth_exceeds(value, max_depth):
        raise Unreadable(f"{what}: JSON nested deeper than {max_depth} levels")
    return value


def loads_object(data, what, max_depth=MAX_DEPTH):
    """Parse a JSON document that must be an object (records, states, receipts, metrics)."""
    value = loads(data, what, max_depth)
    if not isinstance(value, dict):
        raise Unreadable(f"{what}: a JSON {json_kind(value)} where an object was expected")
    return value


def open_regular(path, what):
    """``path`` opened for reading in binary, only if it is a regular file, checked on the open
    descriptor (no race with a swap): a FIFO would block the reader for ever and a device such
    as /dev/zero never ends. Opened without blocking, so that a FIFO is refused, not waited on."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as err:
        raise Unreadable(f"{what}: cannot be read ({err.strerror or type(err).__name__})") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise Unreadable(f"{what}: not a regular file ({file_kind(mode)}); nothing of ours writes one there")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def file_kind(mode):
    kinds = (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a directory"),
    )
    for test, name in kinds:
        if test(mode):
            return name
    return "not a file"


def read_bounded(path, what, max_bytes=MAX_DOCUMENT_BYTES):
    """A regular file's bytes, refusing one larger than ``max_bytes`` without reading it all."""
    try:
        with open_regular(path, what) as fh:
            data = fh.read(max_bytes + 1)
    except OSError as err:
        raise Unreadable(f"{what}: cannot be read ({err.strerror or type(err).__name__})") from None
    if len(data) > max_bytes:
        raise Unreadable(f"{what}: larger than {max_bytes} bytes")
    return data


def load_object_file(path, what, max_bytes=MAX_DOCUMENT_BYTES):
    """Read and parse a JSON object file, bounded."""
    return loads_object(read_bounded(path, what, max_bytes), what)


def depth_exceeds(value, max_depth):
    """Whether ``value`` nests containers deeper than ``max_depth`` (iteratively: no recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, (dict, list)):
            continue
        children = list(item.values()) if isinstance(item, dict) else item
        if depth > max_depth:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def json_kind(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return type(value).__name__


def one_line(text, limit=200):
    """``text`` on one line, cut to ``limit`` characters (for messages quoting something read)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
