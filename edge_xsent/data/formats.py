"""Parsers for the translation and text file formats that Debian packages carry.

Each parser streams (source, translation) or text records from one file and raises
`FormatError`, naming the file and what is wrong, on a malformed one. The build reports
such a file and goes on with the rest; a user calling a parser directly gets the error.

  .mo          GNU gettext binary catalogue        read_mo
  .po          GNU gettext text catalogue          read_po
  .qm          Qt binary translation file          read_qm (needs the source text kept)
  .properties  Java resource bundle, one per lang  read_properties (pairs aligned by key)
  Ding         `DE | DE :: EN | EN` dictionary     read_ding (sub-entries aligned by position)
  fortune      records separated by `%` lines      read_fortunes
"""

from __future__ import annotations

import ast
import re
import struct
from pathlib import Path
from typing import Callable, Iterable, Iterator

from edge_xsent.errors import UserError


class FormatError(UserError):
    """A file that does not follow its format; the message names the file and the problem."""


ErrorSink = Callable[[FormatError], None]


def report(on_error: ErrorSink | None, error: FormatError) -> None:
    """Hand a malformed file to `on_error` (the build lists it and goes on), or raise it."""
    if on_error is None:
        raise error
    on_error(error)


def skip_bad_file(on_error: ErrorSink | None, records: Iterable) -> Iterator:
    """The records of one parser; if the file turns out malformed, report it and stop there."""
    try:
        yield from records
    except FormatError as e:
        report(on_error, e)


def _bytes(path: Path) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise FormatError(f"{path}: cannot read ({e.strerror})") from e


def _text(path: Path) -> str:
    data = _bytes(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")  # older fortune and Ding files; every byte decodes


# ----------------------------------------------------------------------------- gettext .mo

def read_mo(path: Path) -> Iterator[tuple[str, str]]:
    """(msgid, msgstr) of a GNU .mo file; context dropped, plurals reduced to the singular."""
    data = _bytes(path)
    if len(data) < 20:
        raise FormatError(f"{path}: not a .mo file (only {len(data)} bytes; a .mo header is 20)")
    magic = struct.unpack("<I", data[:4])[0]
    endian = "<" if magic == 0x950412DE else ">" if magic == 0xDE120495 else None
    if endian is None:
        raise FormatError(f"{path}: not a .mo file (bad magic number {data[:4].hex()})")
    _, n, orig_off, trans_off = struct.unpack(endian + "4I", data[4:20])
    if max(orig_off, trans_off) + 8 * n > len(data):
        raise FormatError(f"{path}: truncated .mo file (its table of {n} strings runs past the end, byte {len(data)})")
    table = [(struct.unpack(endian + "2I", data[orig_off + 8 * i: orig_off + 8 * i + 8]),
              struct.unpack(endian + "2I", data[trans_off + 8 * i: trans_off + 8 * i + 8])) for i in range(n)]
    for i, ((ol, oo), (tl, to)) in enumerate(table):  # check every string first: all pairs or none
        if max(oo + ol, to + tl) > len(data):
            raise FormatError(f"{path}: truncated .mo file (string {i} ends past byte {len(data)})")
    for (ol, oo), (tl, to) in table:
        msgid = data[oo: oo + ol].split(b"\x00")[0].split(b"\x04")[-1]
        msgstr = data[to: to + tl].split(b"\x00")[0]
        if msgid and msgstr:
            yield msgid.decode("utf-8", errors="replace"), msgstr.decode("utf-8", errors="replace")


# ----------------------------------------------------------------------------- gettext .po

_PO_KEYWORD = re.compile(r'^(msgctxt|msgid|msgid_plural|msgstr(?:\[\d+\])?)\s+(".*")\s*$')


def _po_string(path: Path, n: int, literal: str) -> str:
    try:
        value = ast.literal_eval(literal)
    except (SyntaxError, ValueError) as e:
        raise FormatError(f"{path}:{n}: bad quoted string {literal[:40]!r}") from e
    if not isinstance(value, str):
        raise FormatError(f"{path}:{n}: expected a quoted string, found {literal[:40]!r}")
    return value


def read_po(path: Path) -> Iterator[tuple[str, str]]:
    """(msgid, msgstr) of a .po file; fuzzy entries skipped, plurals reduced to msgstr[0]."""
    entry: dict[str, str] = {}
    key = None
    fuzzy = False

    def done() -> Iterator[tuple[str, str]]:
        msgid, msgstr = entry.get("msgid", ""), entry.get("msgstr", entry.get("msgstr[0]", ""))
        if msgid and msgstr and not fuzzy:
            yield msgid, msgstr

    for n, line in enumerate(_text(path).splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#~"):
            continue
        if line.startswith("#"):
            if line.startswith("#,") and "fuzzy" in line:
                yield from done()
                entry, key, fuzzy = {}, None, True
            continue
        m = _PO_KEYWORD.match(line)
        if m:
            if m.group(1) in ("msgctxt", "msgid") and "msgid" in entry:
                yield from done()
                entry, fuzzy = {}, False
            key = m.group(1)
            entry[key] = _po_string(path, n, m.group(2))
        elif line.startswith('"') and key:
            entry[key] += _po_string(path, n, line)
        else:
            raise FormatError(f"{path}:{n}: not a .po line (expected msgid, msgstr or a quoted string): {line[:60]!r}")
    yield from done()


# ----------------------------------------------------------------------------- Qt .qm

QM_MAGIC = bytes.fromhex("3cb86418caef9c95cd211cbf60a1bddd")
_QM_MESSAGES = 0x69
_QM_END, _QM_TRANSLATION, _QM_OBSOLETE1, _QM_SOURCE, _QM_CONTEXT, _QM_COMMENT = 1, 3, 5, 6, 7, 8


def _qm_blocks(path: Path, data: bytes) -> dict[int, bytes]:
    """Tag -> payload of the top-level blocks (hashes, messages, contexts, ...)."""
    if data[:16] != QM_MAGIC:
        raise FormatError(f"{path}: not a Qt .qm file (bad magic number {data[:16].hex()})")
    blocks, p = {}, 16
    while p < len(data):
        if p + 5 > len(data):
            raise FormatError(f"{path}: truncated .qm file (block header at byte {p})")
        tag, size = data[p], struct.unpack(">I", data[p + 1: p + 5])[0]
        if p + 5 + size > len(data):
            raise FormatError(f"{path}: truncated .qm file (block {tag:#x} runs past byte {len(data)})")
        blocks[tag] = data[p + 5: p + 5 + size]
        p += 5 + size
    return blocks


def read_qm(path: Path) -> Iterator[tuple[str, str]]:
    """(source text, first translation) of each message in a Qt .qm file.
    Only files released with their source text (lrelease's default) carry pairs."""
    msgs = _qm_blocks(path, _bytes(path)).get(_QM_MESSAGES, b"")
    p, source, translation = 0, None, None
    while p < len(msgs):
        tag = msgs[p]
        p += 1
        if tag == _QM_END:
            if source and translation:
                yield source, translation
            source, translation = None, None
        elif tag == _QM_OBSOLETE1:
            p += 4
        elif tag in (_QM_TRANSLATION, _QM_SOURCE, _QM_CONTEXT, _QM_COMMENT):
            if p + 4 > len(msgs):
                raise FormatError(f"{path}: truncated .qm message block at byte {p}")
            size = struct.unpack(">I", msgs[p: p + 4])[0]
            p += 4
            if size == 0xFFFFFFFF:  # a null string
                continue
            field = msgs[p: p + size]
            p += size
            if tag == _QM_TRANSLATION and translation is None:
                translation = field.decode("utf-16-be", errors="replace")
            elif tag == _QM_SOURCE:
                source = field.decode("utf-8", errors="replace")
        else:
            raise FormatError(f"{path}: unknown .qm message tag {tag} at byte {p - 1}")


# ----------------------------------------------------------------------------- Java .properties

def _unescape_properties(value: str) -> str:
    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", lambda m: chr(int(m.group(1)[1:], 16)) if m.group(1)[0] == "u"
                  and len(m.group(1)) == 5 else {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), value)


def read_properties(path: Path) -> dict[str, str]:
    """key -> value of a Java .properties file (`\\` continuations, `\\uXXXX` escapes, # and ! comments)."""
    out: dict[str, str] = {}
    lines = _text(path).splitlines()
    n = 0
    while n < len(lines):
        start, line = n + 1, lines[n].lstrip()
        n += 1
        while line.endswith("\\") and not line.endswith("\\\\") and n < len(lines):
            line = line[:-1] + lines[n].lstrip()
            n += 1
        if not line or line[0] in "#!":
            continue
        m = re.match(r"((?:[^=:\\\s]|\\.)+)\s*[=:]\s*(.*)$", line)
        if m is None:
            raise FormatError(f"{path}:{start}: a .properties line needs key=value, found {line[:60]!r}")
        out[_unescape_properties(m.group(1))] = _unescape_properties(m.group(2))
    return out


# ----------------------------------------------------------------------------- Ding dictionary

_DING_NOTES = re.compile(r"\s*(\{[^}]*\}|\[[^\]]*\])")


def read_ding(path: Path) -> Iterator[tuple[str, str]]:
    """(German, English) sub-entries of a Ding file (`DE | DE :: EN | EN`), aligned by position;
    grammar notes in {} and [] dropped. Entries whose two sides have different sub-entry counts
    are skipped: their alignment is unknown."""
    for n, line in enumerate(_text(path).splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        if " :: " not in line:
            raise FormatError(f"{path}:{n}: a Ding line needs 'German :: English', found {line[:60]!r}")
        de, en = line.split(" :: ", 1)
        de_parts, en_parts = de.split(" | "), en.split(" | ")
        if len(de_parts) != len(en_parts):
            continue
        for d, e in zip(de_parts, en_parts):
            d, e = _DING_NOTES.sub("", d).strip(), _DING_NOTES.sub("", e).strip()
            if d and e:
                yield d, e


# ----------------------------------------------------------------------------- fortune files

_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # terminal colours (fortunes-zh colours its attributions)


def read_fortunes(path: Path) -> Iterator[str]:
    """The records of a fortune file, separated by lines holding only `%`; each record's lines joined."""
    record: list[str] = []
    for line in _ANSI_ESCAPE.sub("", _text(path)).splitlines():
        if line.strip() == "%":
            if record:
                yield " ".join(record)
            record = []
        elif line.strip():
            record.append(line.strip())
    if record:
        yield " ".join(record)


_STRINGTABLE_KEY = re.compile(r"^[A-Z][A-Z0-9_]*$")


def read_stringtable(path: Path) -> dict[str, str]:
    """A FreeOrion string table: a language-name line, then entries of a KEY line followed by
    a one-line value or a '''...''' block (several lines); '#' lines are comments."""
    lines = _text(path).lstrip("\ufeff").splitlines()
    out: dict[str, str] = {}
    i = 1  # line 0 names the language
    while i < len(lines):
        key = lines[i].strip()
        i += 1
        if not key or key.startswith("#") or not _STRINGTABLE_KEY.match(key) or i >= len(lines):
            continue
        value = lines[i]
        i += 1
        if value.startswith("'''"):
            block = [value[3:]]
            while not block[-1].rstrip().endswith("'''"):
                if i >= len(lines):
                    raise FormatError(f"{path}: entry {key} opens ''' and never closes it")
                block.append(lines[i])
                i += 1
            value = "\n".join(block).rstrip()[:-3]
        out[key] = value
    return out
