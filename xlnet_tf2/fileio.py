"""File access that imports TensorFlow only for remote paths (data preparation, tokenizers,
run files), plus the project's one atomic writer, its directory swap and one JSON-object reader.

Nothing is written over good data in place: a file goes to a temporary name beside its target
and is renamed into place when complete (`write_atomically`); a directory of outputs is built
under a staging name beside its target and swapped in when complete (`staging_directory`,
`replace_directory`). A process killed half-way leaves the previous output as it was plus a
dot-named leftover that the next run finds (`leftovers`), reports and removes.

Beam starts every worker as a fresh Python process, and importing TensorFlow there costs
seconds of CPU, more than a worker needs to tokenize megabytes of text
(BENCHMARKS.md#figures-behind-choices-in-the-code). Local paths therefore go through the
standard library, and only URLs (gs://, s3://, hdfs://, ...) load `tf.io.gfile`.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
from typing import IO, Any, List, Optional, Type

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def _local(path: str) -> Optional[str]:
    """The local file name of `path` (a file:// URL's path, or `path` itself), or None when
    `path` is a remote URL (gs://bucket/x, s3://...): the one test of local against remote."""
    if path.startswith("file://"):
        return path[len("file://"):]
    return None if _URL.match(path) else path


def is_remote(path: str) -> bool:
    """Whether `path` is a URL (gs://bucket/x) rather than a local path (file:// counts)."""
    return _local(path) is None


def _gfile():
    import tensorflow as tf  # only for remote file systems

    return tf.io.gfile


def open_file(path: str, mode: str = "r") -> IO:
    """open(path, mode) for local paths, tf.io.gfile.GFile for URLs."""
    local = _local(path)
    if local is None:
        return _gfile().GFile(path, mode)
    return open(local, mode, encoding=None if "b" in mode else "utf-8")


def exists(path: str) -> bool:
    local = _local(path)
    return _gfile().exists(path) if local is None else os.path.exists(local)


def isdir(path: str) -> bool:
    local = _local(path)
    return _gfile().isdir(path) if local is None else os.path.isdir(local)


def makedirs(path: str) -> None:
    local = _local(path)
    if local is None:
        _gfile().makedirs(path)
    else:
        os.makedirs(local, exist_ok=True)


def listdir(path: str) -> List[str]:
    local = _local(path)
    return _gfile().listdir(path) if local is None else os.listdir(local)


def rename(source: str, target: str) -> None:
    """Renames, replacing `target` (atomic on local file systems)."""
    local = _local(source)
    if local is None:
        _gfile().rename(source, target, overwrite=True)
    else:
        os.replace(local, _local(target))


def copy_atomically(source: str, target: str) -> None:
    """Copies a file to a temporary name beside `target`, then renames it into place."""
    with open_file(source, "rb") as f:
        write_atomically(target, f.read())


def remove(path: str) -> None:
    local = _local(path)
    if local is None:
        _gfile().remove(path)
    else:
        os.remove(local)


def remove_path(path: str) -> None:
    """Removes a file, or a directory and everything in it."""
    if isdir(path):
        rmtree(path)
    else:
        remove(path)


def append_line(path: str, line: str) -> None:
    """Appends `line` and a newline to `path` (created if missing): the run's JSON-lines logs,
    which grow by whole lines and are never rewritten in place."""
    with open_file(path, "a") as f:
        f.write(line + "\n")


def rmtree(path: str) -> None:
    """Removes a directory and everything in it; nothing happens if it does not exist."""
    local = _local(path)
    if local is None:
        if _gfile().exists(path):
            _gfile().rmtree(path)
    else:
        shutil.rmtree(local, ignore_errors=True)


def size(path: str) -> int:
    local = _local(path)
    return _gfile().stat(path).length if local is None else os.path.getsize(local)


def glob(pattern: str) -> List[str]:
    """Paths matching `pattern` (*, ?, [...]), unsorted."""
    local = _local(pattern)
    if local is None:
        return _gfile().glob(pattern)
    import glob as _glob

    return [p for p in _glob.glob(local) if os.path.isfile(p)]


def temporary_name(path: str) -> str:
    """A name beside `path` that no other process or call uses, for write-then-rename."""
    return f"{path}.tmp-{os.getpid()}-{os.urandom(6).hex()}"


def write_atomically(path: str, data: bytes) -> None:
    """Writes `data` to a temporary name beside `path`, then renames it into place. A failed
    write (a full disk) removes the temporary file and raises OutputError naming `path`;
    `path` keeps its previous content."""
    tmp = temporary_name(path)
    try:
        with open_file(tmp, "wb") as f:
            f.write(data)
        rename(tmp, path)
    except BaseException as e:
        _remove_quietly(tmp)
        translated = output_error(e, path)
        if translated is None and isinstance(e, OSError) and e.strerror:
            # e.g. the directory does not exist, or `path` is a directory: name `path`, not
            # the temporary file.
            translated = type(e)(e.errno, f"cannot write {path}: {e.strerror}", path)
        raise translated or e


def _remove_quietly(path: str) -> None:
    try:
        if exists(path):
            remove(path)
    except Exception:  # noqa: BLE001 - cleaning up after a failure that is being reported
        pass


# ---------------------------------------------------------------------------- output errors
# What a full disk or a write-protected place makes a write fail with (errno, and the words
# TensorFlow's C++ file systems put in their messages).
_OUTPUT_ERRNOS = {errno.ENOSPC: "No space left on device", errno.EDQUOT: "Disk quota exceeded",
                  errno.EACCES: "Permission denied", errno.EPERM: "Permission denied",
                  errno.EROFS: "Read-only file system"}
_OUTPUT_WORDS = {"No space left on device": errno.ENOSPC, "Disk quota exceeded": errno.EDQUOT,
                 "Permission denied": errno.EACCES, "Read-only file system": errno.EROFS}


class OutputError(OSError):
    """An output could not be written (a full disk, no permission, a read-only file system);
    the message names the path and what to do. Earlier outputs are left as they were."""


def output_error(error: BaseException, path: Optional[str] = None) -> Optional[OutputError]:
    """`error` as an OutputError naming `path` (or the path the error names) if it is a full
    disk or a refused write, else None. Understands OSError and TensorFlow's errors (whose
    message holds "<path>; No space left on device")."""
    if isinstance(error, OutputError):
        return error
    code = getattr(error, "errno", None) if isinstance(error, OSError) else None
    text = str(error)
    if code not in _OUTPUT_ERRNOS:
        code = next((c for words, c in _OUTPUT_WORDS.items() if words in text), None)
        if code is None:
            return None
        # TensorFlow: "{{function_node ...}} /dir/ckpt-5_temp/part...tempstate123; No space..."
        found = re.search(r"(\S+?)(?:\.tempstate\d+)?;\s*" + re.escape(os.strerror(code)),
                          text)
        if found and not path:
            path = found.group(1)
    where = path or getattr(error, "filename", None) or "an output file"
    reason = _OUTPUT_ERRNOS[code]
    fix = ("free space there or write somewhere else" if code in (errno.ENOSPC, errno.EDQUOT)
           else "choose a directory you can write to")
    result = OutputError(code, f"cannot write {where}: {reason}; {fix}. Outputs written "
                               "before this run are unchanged.")
    result.filename = where
    return result


def staging_directory(target: str, kind: str = "tmp") -> str:
    """A new, empty directory beside `target` (same file system, so renaming it into place is
    atomic) named `.<name>.<kind>-<pid>-<random>`: where an output is built before
    `replace_directory` puts it in place. `leftovers(target, kind)` finds it again."""
    target = target.rstrip("/")
    parent, name = os.path.split(target)
    path = os.path.join(parent, f".{name}.{kind}-{os.getpid()}-{os.urandom(4).hex()}")
    try:
        makedirs(path)
    except OSError as e:  # name the output, not the staging name
        raise output_error(e, target) or e
    return path


def leftovers(target: str, kind: str = "tmp") -> List[str]:
    """Staging directories of `target` (`staging_directory`) left by processes that are no
    longer running (killed, or stopped by a failure they could not clean up after)."""
    parent, name = os.path.split(target.rstrip("/"))
    return _left_by_dead_processes(parent, re.escape(f".{name}.{kind}-") + r"(\d+)-[0-9a-f]+$")


def leftover_temporaries(path: str) -> List[str]:
    """Temporary files of `path` (`temporary_name`) left by processes that are no longer
    running: a write killed before its rename."""
    parent, name = os.path.split(path)
    return _left_by_dead_processes(parent, re.escape(f"{name}.tmp-") + r"(\d+)-[0-9a-f]{12}$")


def _left_by_dead_processes(parent: str, pattern: str) -> List[str]:
    """Paths of the entries of `parent` that match `pattern` (whose group 1 is the writer's
    pid) and whose writer is no longer running; on remote paths every match (a pid there
    says nothing about this machine's processes)."""
    parent = parent or "."
    if not isdir(parent):
        return []
    matcher = re.compile(pattern)
    found = []
    for entry in sorted(listdir(parent)):
        entry = entry.rstrip("/")
        match = matcher.match(entry)
        if match and (is_remote(parent) or not _running(int(match.group(1)))):
            found.append(os.path.join(parent, entry))
    return found


def _running(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def replace_directory(staging: str, target: str) -> None:
    """Puts the complete directory `staging` in place of `target`.

    Local paths: `target` (if any) is renamed aside, `staging` renamed to `target`, then the
    old one removed: at every moment `target` is either the old complete directory or the new
    one (a kill between the two renames leaves the old one under `.<name>.old-...`, which
    `leftovers(target, "old")` finds). Remote paths: the files are copied over one by one
    (object stores have no atomic directory rename)."""
    target = target.rstrip("/")
    if is_remote(target):
        if exists(target):
            rmtree(target)
        publish_tree(staging, target)
        return
    if not os.path.exists(_local(target)):
        os.rename(_local(staging), _local(target))
        return
    old = staging_directory(target, "old")
    os.rmdir(old)
    os.rename(_local(target), old)
    os.rename(_local(staging), _local(target))
    shutil.rmtree(old, ignore_errors=True)


def publish_tree(staging: str, target: str) -> None:
    """Moves every file under `staging` to the same place under `target`, then removes
    `staging` (for remote paths; see replace_directory)."""
    for name in listdir(staging):
        source = os.path.join(staging, name.rstrip("/"))
        if isdir(source):
            publish_tree(source, os.path.join(target, name.rstrip("/")))
        else:
            makedirs(target)
            rename(source, os.path.join(target, name))
    rmtree(staging)


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


def read_jsonl(path: str) -> List[Any]:
    """The JSON values of a JSON-lines file, one per non-empty line; [] when it does not exist
    (a run that has not written it yet)."""
    if not exists(path):
        return []
    with open_file(path, "r") as f:
        return [json.loads(line) for line in f if line.strip()]


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
