"""Reading input files and typed fields from them, with errors that name where they were read.

Loaders of packs, imported task files and prediction files all read and check input the same way;
the error class (and so the exit status and message prefix) is theirs.

Every input file a user hands membench is hostile until read: it is read with a size limit
(`MAX_INPUT_BYTES`, so a huge or endless file costs at most that much memory), decoded as strict
UTF-8 (a bad byte is one error line naming the file, the byte offset and the line, not a
traceback), and any name in it that becomes a path component must be a plain name
(`PLAIN_NAME`): run-set ids, pack names, sequence and oracle ids.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path, PurePosixPath
from typing import Any

REQUIRED: Any = ...  # the default of a field that must be present

#: The largest manifest, tasks.json, reference solution or predictions file membench reads: 16 MiB.
#: The built-in packs' manifests are under 1 MiB; a file past the limit is refused, not truncated.
MAX_INPUT_BYTES = 16 * 1024 * 1024

#: A name that becomes one path component (a run-set id, a pack name, a sequence or oracle id):
#: a letter or digit, then up to 127 letters, digits, '.', '_' or '-'; never '..' anywhere. So it
#: has no path separator, cannot be '.' or '..', cannot start with a dot (hidden, or a staging
#: directory) or a dash (an option), and fits in any file system's name limit.
PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
PLAIN_NAME_RULE = "1-128 characters: a letter or digit, then letters, digits, '.', '_', '-'; no '..'"


def typed_field(obj: dict[str, Any], key: str, typ: type | tuple[type, ...], where: str, *,
                error: type[Exception], default: Any = REQUIRED, none_is_missing: bool = True) -> Any:
    """obj[key] if it is a `typ` (a bool is not an int); `default` if the key is absent — or
    null, when `none_is_missing` — and a default is given; otherwise raises `error` naming
    `where` and the field."""
    if key not in obj or (none_is_missing and obj[key] is None):
        if default is REQUIRED:
            raise error(f"{where}: missing required field '{key}'")
        return default
    value = obj[key]
    if not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
        name = typ.__name__ if isinstance(typ, type) else " or ".join(t.__name__ for t in typ)
        raise error(f"{where}: field '{key}' must be {name}, got {type(value).__name__}")
    return value


def is_plain_name(value: object) -> bool:
    """True when VALUE may be used as one path component (`PLAIN_NAME`, no '..')."""
    return isinstance(value, str) and PLAIN_NAME.fullmatch(value) is not None and ".." not in value


def relative_path_problem(rel: object) -> str | None:
    """Why REL cannot name a file inside a directory ("is absolute", ...), or None when it can: it
    must be a non-empty relative POSIX path without '..' components, backslashes or NUL bytes.
    (Lexical only: a symbolic link on the way is checked where the path is resolved.)"""
    if not isinstance(rel, str):
        return f"is a {type(rel).__name__}, not a string"
    if not rel:
        return "is empty"
    if "\0" in rel or "\\" in rel:
        return "holds a NUL byte or a backslash"
    if PurePosixPath(rel).is_absolute():
        return "is absolute"
    if ".." in rel.split("/"):
        return "leaves its directory ('..')"
    return None


def format_size(size: int) -> str:
    if size % (1024 * 1024) == 0:
        return f"{size // (1024 * 1024)} MiB"
    return f"{size} bytes"


def read_input_bytes(path: str | Path, error: type[Exception], *, limit: int = MAX_INPUT_BYTES) -> bytes:
    """PATH's bytes, reading at most `limit` + 1 bytes: a larger file raises `error` (one line
    naming the file and the limit) without being loaded."""
    path = Path(path)
    try:
        with path.open("rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise error(f"{path}: cannot read ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise error(f"{path}: larger than the {format_size(limit)} input limit (refused unread)")
    return data


def decode_utf8(data: bytes, path: str | Path, error: type[Exception]) -> str:
    """DATA as strict UTF-8; a bad byte raises `error` naming the file, the byte offset (0-based)
    of the first invalid byte and its line."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(utf8_error_message(path, data, exc.start)) from None


def utf8_error_message(path: str | Path, data: bytes, offset: int, base: int = 0, line: int | None = None) -> str:
    """The one line naming an invalid UTF-8 byte: DATA[offset] is the byte; BASE is DATA's offset
    in the file and LINE the line DATA starts on (when DATA is a piece of the file)."""
    number = (line or 1) + data.count(b"\n", 0, offset)
    return (f"{path}: not UTF-8: invalid byte 0x{data[offset]:02x} at byte offset {base + offset} "
            f"(line {number})")


def read_input_text(path: str | Path, error: type[Exception], *, limit: int = MAX_INPUT_BYTES) -> str:
    """PATH as UTF-8 text, within the size limit (`read_input_bytes`, `decode_utf8`)."""
    return decode_utf8(read_input_bytes(path, error, limit=limit), path, error)


def unknown_key_problem(obj: dict[str, Any], known: frozenset[str] | set[str] | tuple[str, ...],
                        path: str = "") -> str | None:
    """None when every key of OBJ is in KNOWN; otherwise one line naming the first unknown key (as a
    key path under PATH, e.g. 'sequences[2].sessions[0].oracle') and the nearest known key, so a
    misspelt field is refused instead of silently ignored (a loader that ignores it would fall back
    to the field's default and run a different benchmark than the one authored)."""
    for key in obj:
        if key in known:
            continue
        name = f"{path}.{key}" if path else str(key)
        hint = did_you_mean(str(key), known) or f"; known keys: {', '.join(sorted(known))}"
        return f"unknown key '{name}'{hint}"
    return None


def nearest_name(name: str, known) -> str | None:
    """The known name NAME most likely misspells (a case-only difference first, then the closest
    spelling), or None when none is close."""
    by_lower = {k.lower(): k for k in sorted(known)}
    if name.lower() in by_lower:
        return by_lower[name.lower()]
    near = difflib.get_close_matches(name.lower(), sorted(by_lower), n=1, cutoff=0.6)
    return by_lower[near[0]] if near else None


def did_you_mean(name: str, known) -> str:
    """"; did you mean 'X'?" for the nearest known name (`nearest_name`), or "" when none is close:
    appended to an "unknown ..." message, before its list of known names."""
    near = nearest_name(name, known)
    return f"; did you mean '{near}'?" if near else ""
