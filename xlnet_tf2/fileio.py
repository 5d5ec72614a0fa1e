"""File access that imports TensorFlow only for remote paths (data preparation, tokenizers,
run files), plus the project's one atomic writer and one JSON-object reader.

Beam starts every worker as a fresh Python process; importing TensorFlow there costs about
4.4 s of one core per worker (measured here), more than a worker needs to tokenize 4 MB of
text. Local paths therefore go through the standard library, and only URLs (gs://, s3://,
hdfs://, ...) load `tf.io.gfile`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from typing import IO, Any, List, Type

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_remote(path: str) -> bool:
    """Whether `path` is a URL (gs://bucket/x) rather than a local path (file:// counts)."""
    return bool(_URL.match(path)) and not path.startswith("file://")


def _local(path: str) -> str:
    return path[len("file://"):] if path.startswith("file://") else path


def _gfile():
    import tensorflow as tf  # only for remote file systems

    return tf.io.gfile


def open_file(path: str, mode: str = "r") -> IO:
    """open(path, mode) for local paths, tf.io.gfile.GFile for URLs."""
    if is_remote(path):
        return _gfile().GFile(path, mode)
    encoding = None if "b" in mode else "utf-8"
    return open(_local(path), mode, encoding=encoding)


def exists(path: str) -> bool:
    return _gfile().exists(path) if is_remote(path) else os.path.exists(_local(path))


def isdir(path: str) -> bool:
    return _gfile().isdir(path) if is_remote(path) else os.path.isdir(_local(path))


def makedirs(path: str) -> None:
    if is_remote(path):
        _gfile().makedirs(path)
    else:
        os.makedirs(_local(path), exist_ok=True)


def listdir(path: str) -> List[str]:
    return _gfile().listdir(path) if is_remote(path) else os.listdir(_local(path))


def rename(source: str, target: str) -> None:
    """Renames, replacing `target` (atomic on local file systems)."""
    if is_remote(source):
        _gfile().rename(source, target, overwrite=True)
    else:
        os.replace(_local(source), _local(target))


def copy_atomically(source: str, target: str) -> None:
    """Copies a file to a temporary name beside `target`, then renames it into place."""
    with open_file(source, "rb") as f:
        write_atomically(target, f.read())


def remove(path: str) -> None:
    if is_remote(path):
        _gfile().remove(path)
    else:
        os.remove(_local(path))


def rmtree(path: str) -> None:
    """Removes a directory and everything in it; nothing happens if it does not exist."""
    if is_remote(path):
        if _gfile().exists(path):
            _gfile().rmtree(path)
    else:
        shutil.rmtree(_local(path), ignore_errors=True)


def size(path: str) -> int:
    return _gfile().stat(path).length if is_remote(path) else os.path.getsize(_local(path))


def glob(pattern: str) -> List[str]:
    """Paths matching `pattern` (*, ?, [...]), unsorted."""
    if is_remote(pattern):
        return _gfile().glob(pattern)
    import glob as _glob

    return [p for p in _glob.glob(_local(pattern)) if os.path.isfile(p)]


def temporary_name(path: str) -> str:
    """A name beside `path` that no other process or call uses, for write-then-rename."""
    return f"{path}.tmp-{os.getpid()}-{os.urandom(6).hex()}"


def write_atomically(path: str, data: bytes) -> None:
    """Writes `data` to a temporary name beside `path`, then renames it into place."""
    tmp = temporary_name(path)
    with open_file(tmp, "wb") as f:
        f.write(data)
    rename(tmp, path)


def publish_directory(staging: str, target: str, last: tuple = ()) -> None:
    """Moves every file of the flat directory `staging` into `target` (each rename atomic on
    local file systems; names in `last` after the others, e.g. a checkpoint's state file),
    then removes `staging`. Files of `target` that `staging` lacks are left as they are."""
    makedirs(target)
    names = sorted(listdir(staging), key=lambda name: name in last)
    for name in names:
        rename(os.path.join(staging, name), os.path.join(target, name))
    rmtree(staging)


def write_json_atomically(path: str, value: Any) -> None:
    """`value` as indented, key-sorted JSON, written atomically."""
    write_atomically(path, (json.dumps(value, indent=2, sort_keys=True) + "\n").encode())


def read_json_object(path: str, error: Type[Exception] = ValueError, what: str = "",
                     fix: str = "") -> dict:
    """The JSON object stored in `path`. A missing file, a file that is not valid JSON (cut
    short by a full disk or a copy) or that holds something else than an object raises
    `error` with one line naming the file, `what` it is and `fix` (what to do)."""
    label = f"{path}{f' ({what})' if what else ''}"
    tail = f" {fix}" if fix else ""
    if not exists(path):
        raise error(f"{label} does not exist.{tail}")
    try:
        with open_file(path, "r") as f:
            values = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise error(f"{label} is not valid JSON ({e}).{tail}") from None
    if not isinstance(values, dict):
        raise error(f"{label} must hold a JSON object, not {type(values).__name__}.{tail}")
    return values
