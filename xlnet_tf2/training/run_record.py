"""What a training run's model_dir records about the run itself, across restarts.

  run_config.json  the settings the run was started with (written once, by the attempt that
                   started the run; later attempts compare their settings with it, never
                   overwrite it): {"settings": <config tree>, "derived": {...}}
  attempts.jsonl   one line per attempt (start or restart): its number, the step it started
                   from, the checkpoint it restored and the settings it changed
  steps.jsonl      with --record_steps: one line per trained step, with the attempt that
                   trained it; on a restart the lines of steps the last checkpoint does not
                   hold (trained by an attempt that then died) are dropped, so the file holds
                   exactly the steps the weights went through, each once

A changed setting whose resume policy is "fixed" (xlnet_tf2/config_flags.py) is an error naming
the flag, the value the checkpoints were trained with and the new one; a "warn" setting is
logged and recorded in attempts.jsonl.
"""

from __future__ import annotations

import json
import os
import re
import time
from typing import Any, Dict, List, Mapping, Optional, Type

import tensorflow as tf
from absl import logging

from xlnet_tf2 import config_flags, fileio
from xlnet_tf2.config_flags import ChangedSetting, RunConfigError

RUN_CONFIG_FILE = "run_config.json"
ATTEMPTS_FILE = "attempts.jsonl"
STEPS_FILE = "steps.jsonl"

# What TensorFlow's checkpoint writer leaves behind when a process dies mid-save:
# "<prefix>_temp/" (sharded save) and "<prefix>_temp_<uuid>/" directories, "*.tempstate*" files.
# (the last alternative: a file written atomically by fileio.write_atomically, cut short)
_STALE = re.compile(r"^(ckpt-\d+_temp.*|.*\.tempstate\d*|checkpoint\.tmp.*"
                    r"|.*\.tmp-\d+-[0-9a-f]{12})$")


def flatten(values: Mapping[str, Any]) -> Dict[str, Any]:
    """Leaves of a nested settings dict by name (older run_config.json files are flat)."""
    out: Dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, dict):
            out.update(flatten(value))
        else:
            out[key] = value
    return out


def clean_stale_files(model_dir: str) -> List[str]:
    """Removes what a save interrupted by a crash left in model_dir; returns the names."""
    if not tf.io.gfile.isdir(model_dir):
        return []
    removed = []
    for name in tf.io.gfile.listdir(model_dir):
        name = name.rstrip("/")
        if _STALE.match(name):
            fileio.remove_path(os.path.join(model_dir, name))
            removed.append(name)
    if removed:
        logging.info("Removed %d leftovers of an interrupted checkpoint save: %s", len(removed),
                     ", ".join(sorted(removed)))
    return removed


def changes_against_record(config_cls: Type, config, derived: Mapping[str, Any],
                           record: Mapping[str, Any]) -> List[ChangedSetting]:
    """Settings (and derived values: data shape, architecture) that differ from the record."""
    stored = flatten(record.get("settings", record))
    changes = config_flags.changed_settings(config_cls, stored, config)
    stored_derived = record.get("derived", {})
    for name, value in derived.items():
        if name in stored_derived and stored_derived[name] != value:
            changes.append(ChangedSetting(name, stored_derived[name], value, "fixed"))
    return changes


def check_resume(config_cls: Type, config, derived: Mapping[str, Any], model_dir: str,
                 derived_sources: Optional[Mapping[str, str]] = None) -> List[ChangedSetting]:
    """Compares this attempt's settings with run_config.json of a run that has checkpoints.

    Raises:
      RunConfigError naming every changed "fixed" setting.
    Returns:
      the changed "warn" settings (logged by the caller and recorded in attempts.jsonl).
    """
    path = os.path.join(model_dir, RUN_CONFIG_FILE)
    record = (fileio.read_json_object(
        path, RunConfigError, "the settings of the run in that directory",
        "Restore it, or use a new --model_dir.") if fileio.exists(path) else None)
    if record is None:
        return []
    changes = changes_against_record(config_cls, config, derived, record)
    fixed = [c for c in changes if c.resume == "fixed"]
    if fixed:
        sources = dict(derived_sources or {})
        lines = []
        for c in fixed:
            where = sources.get(c.name)
            lines.append(f"{c.name} (from {where}): the checkpoints were trained with {c.old!r}, "
                         f"this run asks for {c.new!r}" if where else
                         f"--{c.name}: the checkpoints were trained with {c.old!r}, this run "
                         f"asks for {c.new!r}")
        raise RunConfigError(
            f"{model_dir} holds checkpoints of a run with other settings: "
            + "; ".join(lines) + ". Resume with the original values, or start a new run in "
            "another --model_dir (with --init_checkpoint to start from these weights).")
    return [c for c in changes if c.resume == "warn"]


def write_run_config(model_dir: str, config, derived: Mapping[str, Any]) -> None:
    """Records the settings; --model_dir as "." (the directory itself: a run directory never
    names itself by path, so it can be copied or moved)."""
    settings = config_flags.to_dict(config)
    for section in [settings] + [v for v in settings.values() if isinstance(v, dict)]:
        if "model_dir" in section:
            section["model_dir"] = "."
    fileio.write_json_atomically(os.path.join(model_dir, RUN_CONFIG_FILE),
                                 {"settings": settings, "derived": dict(derived)})


def start_attempt(model_dir: str, *, start_step: int, restored_from: Optional[str],
                  changed: List[ChangedSetting]) -> int:
    """Appends this attempt to attempts.jsonl; returns its number (1 for the first)."""
    path = os.path.join(model_dir, ATTEMPTS_FILE)
    number, text = 1, ""
    if tf.io.gfile.exists(path):
        with tf.io.gfile.GFile(path, "rb") as f:
            text = f.read().decode("utf-8", errors="replace")
        # Every line that was written whole counts (a line cut short by a kill does too: it
        # was an attempt); numbers continue after the largest one recorded.
        numbers = [_attempt_number(line) for line in text.splitlines() if line.strip()]
        number = max([n for n in numbers if n] + [len(numbers)]) + 1
    entry = {"attempt": number, "start_step": start_step, "restored_from": restored_from,
             "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
             "changed_settings": {c.name: {"was": c.old, "now": c.new} for c in changed}}
    # A line cut short by a kill is ended first, so this entry is a line of its own.
    fileio.append_line(path, ("\n" if text and not text.endswith("\n") else "") + json.dumps(entry))
    for c in changed:
        logging.warning("Resuming with a changed setting: %s.", c.describe())
        print(f"[resume] note: {c.describe()}", flush=True)
    return number


def _attempt_number(line: str) -> Optional[int]:
    try:
        value = json.loads(line).get("attempt")
    except (json.JSONDecodeError, AttributeError):
        return None
    return value if isinstance(value, int) else None


def prune_steps_log(model_dir: str, start_step: int) -> int:
    """Drops steps.jsonl lines of steps after `start_step` (trained by an attempt that died
    before its next checkpoint; they are trained again); returns how many were dropped."""
    path = os.path.join(model_dir, STEPS_FILE)
    if not tf.io.gfile.exists(path):
        return 0
    with tf.io.gfile.GFile(path) as f:
        lines = [line for line in f.read().splitlines() if line.strip()]
    kept = []
    for line in lines:
        try:
            step = json.loads(line)["step"]
        except (json.JSONDecodeError, KeyError, TypeError):
            continue  # a line cut short by a kill
        if step <= start_step:
            kept.append(line)
    dropped = len(lines) - len(kept)
    if dropped:
        fileio.write_atomically(path, "".join(line + "\n" for line in kept).encode())
        logging.info("steps.jsonl: dropped %d lines of steps after checkpoint step %d.",
                     dropped, start_step)
    return dropped
