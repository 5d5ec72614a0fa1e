"""`record_info.json`: what a prepared directory holds, written last and checked by training.

The manifest is written atomically (temporary file, then rename) after every TFRecord file
is complete, and preparation deletes any old manifest before it starts, so a directory with
a manifest always holds exactly the data it describes.

`file_stats` = {file name: {"records": int, "bytes": int}} records every file's record count
and byte size; `read_manifest` checks the sizes, so a truncated or partly copied file is
refused by name instead of ending an epoch early.
"""

from __future__ import annotations

import os
from typing import Optional

from xlnet_tf2 import fileio

MANIFEST_NAME = "record_info.json"
FORMAT = "xlnet-tf2-pretrain-v1"


class ManifestError(ValueError):
    """A prepared directory is missing, incomplete, or does not match the training setup."""


def write_manifest(output_dir: str, manifest: dict) -> str:
    path = os.path.join(output_dir, MANIFEST_NAME)
    fileio.write_json_atomically(path, manifest)
    return path


def read_manifest(data_dir: str) -> dict:
    """Reads and sanity-checks a manifest; raises ManifestError naming the directory."""
    path = os.path.join(data_dir, MANIFEST_NAME)
    if not fileio.exists(path):
        raise ManifestError(f"{data_dir} has no {MANIFEST_NAME}: it was not prepared by "
                            "data_prep/create_tfrecords.py or the preparation did not finish. "
                            "Run (or re-run) data preparation into it.")
    manifest = fileio.read_json_object(
        path, ManifestError, "the manifest of prepared data",
        "Re-run data_prep/create_tfrecords.py into the directory, or copy it again whole.")
    if manifest.get("format") != FORMAT:
        raise ManifestError(f"{path} has format {manifest.get('format')!r}, expected {FORMAT!r}; "
                            "re-prepare the data with this version of data_prep.")
    check_fields(manifest, path)
    missing = [name for name in manifest["files"]
               if not fileio.exists(os.path.join(data_dir, name))]
    if missing:
        raise ManifestError(f"{data_dir} lacks {len(missing)} files listed in its manifest "
                            f"(first: {missing[0]}); copy the whole directory or re-prepare.")
    # Every file's size is checked against file_stats (manifests written before they existed
    # have none and still load) by xlnet_tf2/data/integrity.py, in parallel, for the files a
    # pipeline reads: a stat per file is slow on cloud storage.
    return manifest


# What training reads from a manifest, and of what type: a file edited by hand, or changed by
# a bad copy, is refused naming the field instead of failing later inside the pipeline.
_INTEGER = (int,)
_FIELDS = {"params": dict, "vocab_size": _INTEGER, "spm_sha256": str, "files": list,
           "num_streams": _INTEGER, "num_passes": _INTEGER, "chunks_per_stream": _INTEGER,
           "num_examples": _INTEGER, "total_tokens": _INTEGER}
_PARAMS = {"seq_len": _INTEGER, "reuse_len": _INTEGER, "num_predict": _INTEGER,
           "perm_size": _INTEGER, "bi_data": bool}


def check_fields(manifest: dict, path: str) -> None:
    """Raises ManifestError naming the first field training reads that is missing or of the
    wrong type (or a count that is not positive)."""
    fix = ("The manifest is damaged: re-run data_prep/create_tfrecords.py, or copy the "
           "directory again whole.")
    for fields, values, where in ((_FIELDS, manifest, ""), (_PARAMS, manifest.get("params"),
                                                            "params.")):
        for name, kind in fields.items():
            value = values.get(name) if isinstance(values, dict) else None
            wrong = value is None or not isinstance(value, kind) or (
                kind is _INTEGER and isinstance(value, bool))
            if not wrong and kind is _INTEGER and name != "total_tokens" and value <= 0 \
                    and name not in ("reuse_len",):
                wrong = True
            if wrong:
                raise ManifestError(f"{path}: {where}{name} is {value!r}, not a valid value. "
                                    + fix)
    if not all(isinstance(name, str) and name and "/" not in name for name in manifest["files"]):
        raise ManifestError(f"{path}: files must be names of files in the directory. " + fix)
    if len(manifest["files"]) != manifest["num_streams"] * manifest["num_passes"] * (
            2 if manifest["params"]["bi_data"] else 1):
        raise ManifestError(f"{path}: files lists {len(manifest['files'])} files for "
                            f"{manifest['num_streams']} streams x {manifest['num_passes']} "
                            "passes. " + fix)


def check_manifest(manifest: dict, *, data_dir: str, seq_len: int, reuse_len: int,
                   num_predict: int, bi_data: bool, vocab_size: int,
                   spm_sha256: Optional[str] = None) -> None:
    """Refuses data prepared with different settings than training uses.

    Raises:
      ManifestError listing every mismatch as "name: data has X, training asks for Y".
    """
    params = manifest["params"]
    wanted = {"seq_len": seq_len, "reuse_len": reuse_len, "num_predict": num_predict,
              "bi_data": bool(bi_data)}
    problems = [f"{k}: data has {params[k]}, training asks for {v}"
                for k, v in wanted.items() if params[k] != v]
    if manifest["vocab_size"] != vocab_size:
        problems.append(f"vocab_size: data has {manifest['vocab_size']}, training asks for "
                        f"{vocab_size}")
    if spm_sha256 is not None and manifest["spm_sha256"] != spm_sha256:
        problems.append("SentencePiece model: the data was encoded with another model "
                        f"(sha256 {manifest['spm_sha256'][:12]}..., training uses "
                        f"{spm_sha256[:12]}...)")
    if problems:
        raise ManifestError(f"{data_dir} does not match the training configuration: "
                            + "; ".join(problems)
                            + ". Change the training flags or re-prepare the data.")
