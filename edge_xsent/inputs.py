"""One rule for every file a command reads (issue 74): a regular file only (a FIFO would hang the reader,
/dev/zero feed it forever, a link loop or a folder trace back), no more bytes than its format can need, JSON of
bounded depth, no NUL byte in a path. Every failure is a UserError naming the file and the fix. Torch-free: the
encoder's loader reads through it."""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from edge_xsent.errors import UserError

MiB = 2**20
# The most a file of each kind may hold: far above any real one (e5-small's tokenizer.json is 17 MB, a manifest
# of a bundle 4 KB), far below what would exhaust memory.
CAPS = {"json": 128 * MiB, "toml": 4 * MiB, "tokenizer": 64 * MiB, "log": 1024 * MiB}
JSON_DEPTH = 200  # nesting a reader accepts; Python's parser recurses and would overflow at about 1,000
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)


def as_path(path: str | os.PathLike, what: str = "path") -> Path:
    """A path from a str or PathLike (bytes too), refused if it holds a NUL byte, which no file name can."""
    try:
        text = os.fsdecode(os.fspath(path))
    except TypeError:
        raise UserError(f"{what} {path!r}: a file path (str or os.PathLike) is needed") from None
    if "\0" in text:
        raise UserError(f"{what} {text!r}: a path cannot hold a NUL byte; check how it was written")
    return Path(text)


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words for an error line."""
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a link")):
        if test(mode):
            return name
    return "not a regular file"


def is_devnull(path: Path) -> bool:
    """`path` is the null device (by its device number, under any name): written to, never replaced."""
    try:
        st, null = os.stat(path), os.stat(os.devnull)
    except OSError:
        return False
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == null.st_rdev


def os_error(e: OSError, path: Path) -> Exception:
    """A path's OSErrors that are the user's to fix (a link loop, a name too long) as UserErrors; the rest stay."""
    if e.errno == errno.ELOOP:
        return UserError(f"{path}: a link that leads back to itself (a loop); replace it with the real file")
    if e.errno == errno.ENAMETOOLONG:
        return UserError(f"{str(path)[:80]}...: the path is too long for this system; use a shorter one")
    return OSError(e.errno, e.strerror, str(path))


def open_regular(path: str | os.PathLike, what: str = "file", stream: bool = False) -> int:
    """A descriptor of `path` if it is a regular file (links followed); a FIFO is opened without waiting for a
    writer, then refused, so nothing hangs. `stream`: a FIFO is taken too (a file read once, such as
    `--config <(cat recipe.toml)`), its descriptor left non-blocking for read_bytes."""
    p = as_path(path, what)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        if e.errno == errno.ENXIO:  # a socket, or a device that is not there
            raise UserError(f"{p}: {what} is not a regular file; give a file") from None
        raise os_error(e, p) from None
    mode = os.fstat(fd).st_mode
    if stream and stat.S_ISFIFO(mode):
        return fd
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise UserError(f"{p}: {what} is {kind_of(mode)}, not a regular file; give a file")
    os.set_blocking(fd, True)
    return fd


def read_bytes(path: str | os.PathLike, cap: int | None = None, what: str = "file", stream: bool = False) -> bytes:
    """The bytes of a regular file, refused (named) past `cap`. `stream`: a FIFO is read too, to its end or past
    `cap` (a FIFO nothing writes to reads as empty, and is refused: nothing hangs)."""
    p = as_path(path, what)
    fd = open_regular(p, what, stream)
    if stream and stat.S_ISFIFO(os.fstat(fd).st_mode):
        return _read_stream(fd, p, cap if cap is not None else CAPS["log"], what)
    too_big = f"more than a {what} can be ({(cap or 0) // MiB} MiB); is it the right file?"
    with os.fdopen(fd, "rb") as f:
        size = os.fstat(fd).st_size
        if cap is not None and size > cap:
            raise UserError(f"{p}: {size / MiB:.0f} MiB, {too_big}")
        data = f.read() if cap is None else _read_capped(f, size, cap)
    if cap is not None and len(data) > cap:  # grew while we read it
        raise UserError(f"{p}: {too_big}")
    return data


def _read_capped(f, size: int, cap: int) -> bytes:
    """The file's `size` bytes and whatever it grew by while read, up to `cap` + 1: never `read(cap + 1)`, which
    reserves the whole cap up front (8 GiB for a pack's chunk, refused under an address-space limit)."""
    parts = [f.read(size + 1)]
    total = len(parts[0])
    while total > size and total <= cap and (chunk := f.read(min(1 << 20, cap + 1 - total))):
        parts.append(chunk)
        total += len(chunk)
    return b"".join(parts)


def _read_stream(fd: int, p: Path, cap: int, what: str) -> bytes:
    """A FIFO's bytes as its writer sends them, waited for (select), never more than `cap`."""
    import select

    chunks, size = [], 0
    with os.fdopen(fd, "rb", buffering=0) as f:
        while True:
            try:  # first: a FIFO with no writer reads as its end at once (select would wait on it for ever)
                chunk = f.read(1 << 16)
            except BlockingIOError:
                chunk = None
            if chunk is None:  # a writer, nothing written yet
                select.select([fd], [], [])
                continue
            if not chunk:
                break
            chunks.append(chunk)
            if (size := size + len(chunk)) > cap:
                raise UserError(f"{p}: more than a {what} can be ({cap // MiB} MiB); is it the right stream?")
    if not size:
        raise UserError(f"{p}: {what} is a FIFO (named pipe) that gave nothing (no writer, or an empty one); give a "
                        "file, or a stream with content such as <(cat recipe.toml)")
    return b"".join(chunks)


def read_text(path: str | os.PathLike, cap: int | None = None, what: str = "file", stream: bool = False) -> str:
    try:
        return read_bytes(path, cap, what, stream).decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start}); save the {what} as UTF-8") from None


def parse_json(data: bytes | str, where: str | os.PathLike, what: str = "JSON") -> Any:
    """JSON from bytes, its failures (corrupt, not UTF-8, nested past JSON_DEPTH) a UserError naming `where` and
    calling the file `what` ("corrupt manifest"). The depth is found before parsing, outside strings, so a hostile
    file never reaches the parser's recursion (100,000 levels overflow it)."""
    import numpy as np

    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    code = np.frombuffer(_STRING.sub(b"", raw), dtype=np.uint8)
    if np.cumsum(np.isin(code, (0x5B, 0x7B)).astype(np.int32) - np.isin(code, (0x5D, 0x7D))).max(initial=0) > JSON_DEPTH:
        raise UserError(f"{where}: JSON nested more than {JSON_DEPTH} deep; the file is corrupt or hostile")
    try:
        return json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
        raise UserError(f"{where}: corrupt {what} ({str(e)[:200]})") from None


def read_json(path: str | os.PathLike, cap: int = CAPS["json"], what: str = "JSON file") -> Any:
    return parse_json(read_bytes(path, cap, what), as_path(path, what))
