"""Where a model's files are: a local directory of a known layout, or a HuggingFace Hub
download.

    resolve("path/to/dir")          -> Resolved(directory, layout) for a local directory
    resolve("xlnet-base-cased")     -> the hub copy of a release name (cache, else download)
    resolve("owner/name")           -> the hub copy of a repository id

Layouts (`LAYOUTS`): "converted" (this project's layout: xlnet_config.json with model.ckpt.*,
training checkpoints or task.json: a converted release, a pretraining or fine-tuning
model_dir; a task directory's checkpoint is looked for when it is read),
"huggingface" (config.json with model.safetensors or pytorch_model.bin), "original" (the
zihangdai/xlnet release: xlnet_model.ckpt.*, xlnet_config.json, spiece.model).

Nothing here builds a model: models/pretrained.py turns a resolved directory into one, and
`XLNetTokenizer.from_pretrained` takes its spiece.model. The `huggingface_hub` package is
imported only for a download; it is not a requirement of this library.
"""


from __future__ import annotations

import dataclasses
import os
import re
from typing import Optional

from xlnet_tf2 import fileio, run_dir

ORIGINAL_PREFIX = "xlnet_model.ckpt"
HF_CONFIG = "config.json"
HF_WEIGHTS = ("model.safetensors", "pytorch_model.bin")
LAYOUTS = ("converted", "huggingface", "original")
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_DOWNLOAD_TIMEOUT_S = 10.0  # per request: an unreachable hub fails in seconds, never hangs


@dataclasses.dataclass(frozen=True)
class Pretrained:
    preset: str      # XLNetConfig preset of its architecture
    repo_id: str     # where the HuggingFace Hub keeps it


PRETRAINED = {
    "xlnet-base-cased": Pretrained("base", "xlnet/xlnet-base-cased"),
    "xlnet-large-cased": Pretrained("large", "xlnet/xlnet-large-cased"),
}


class PretrainedNotFoundError(FileNotFoundError):
    """A name or directory gives no model; the message says what was looked at and what to do."""


@dataclasses.dataclass(frozen=True)
class Resolved:
    """A local directory holding a model, and which layout it has (one of LAYOUTS)."""
    directory: str
    layout: str

    def spm_model(self) -> str:
        path = os.path.join(self.directory, run_dir.SPM_FILE)
        if not fileio.exists(path):
            raise PretrainedNotFoundError(
                f"{self.directory} holds no {run_dir.SPM_FILE} (the SentencePiece model); "
                "copy the model's spiece.model there.")
        return path


def detect_layout(directory: str) -> Optional[str]:
    """Which layout a directory has (one of LAYOUTS), or None."""
    def has(name):
        return fileio.exists(os.path.join(directory, name))

    if has(run_dir.ARCH_FILE) and has(ORIGINAL_PREFIX + ".index"):
        return "original"
    if has(run_dir.ARCH_FILE) and (has(run_dir.SAVED_CHECKPOINT_PREFIX + ".index")
                                       or has(run_dir.TASK_FILE)
                                       or run_dir.latest_checkpoint(directory)
                                       or run_dir.checkpoint_prefixes(directory)):
        return "converted"
    if has(HF_CONFIG) and any(has(w) for w in HF_WEIGHTS):
        return "huggingface"
    return None


def resolve(name_or_dir: str, *, cache_dir: Optional[str] = None,
            revision: Optional[str] = None, local_files_only: bool = False) -> Resolved:
    """The local model directory for a directory, release name or hub repository id."""
    if fileio.isdir(name_or_dir):
        layout = detect_layout(name_or_dir)
        if layout is None:
            raise PretrainedNotFoundError(
                f"{name_or_dir} holds no model: expected xlnet_config.json with a checkpoint "
                f"(this project's or the original release's {ORIGINAL_PREFIX}.*), or a "
                f"HuggingFace {HF_CONFIG} with {' or '.join(HF_WEIGHTS)}.")
        return Resolved(name_or_dir, layout)
    if name_or_dir in PRETRAINED:
        repo_id = PRETRAINED[name_or_dir].repo_id
    elif _REPO_ID.match(name_or_dir):
        repo_id = name_or_dir
    else:
        raise PretrainedNotFoundError(
            f"{name_or_dir!r} is not a directory, a HuggingFace Hub repository id (owner/name) "
            f"or a release name ({', '.join(sorted(PRETRAINED))}).")
    directory = _download(name_or_dir, repo_id, cache_dir, revision, local_files_only)
    layout = detect_layout(directory)
    if layout != "huggingface":
        raise PretrainedNotFoundError(f"The hub repository {repo_id} has no {HF_CONFIG} with "
                                      f"{' or '.join(HF_WEIGHTS)} (found in {directory}).")
    return Resolved(directory, layout)


def _offline() -> bool:
    flag = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return flag.strip().upper() in ("1", "ON", "YES", "TRUE")


def _download(name: str, repo_id: str, cache_dir, revision, local_files_only) -> str:
    """snapshot_download of the files a conversion needs; every failure is one clear error."""
    try:
        import huggingface_hub  # only here: the library does not depend on it
    except ImportError:
        raise PretrainedNotFoundError(
            f"{name!r} is not a local directory, and getting {repo_id} from the HuggingFace "
            "Hub needs the huggingface_hub package: pip install huggingface_hub (or download "
            "the model elsewhere and pass its directory).") from None
    offline = local_files_only or _offline()
    patterns = [HF_CONFIG, run_dir.SPM_FILE]
    try:
        directory = huggingface_hub.snapshot_download(
            repo_id, revision=revision, cache_dir=cache_dir, local_files_only=offline,
            allow_patterns=patterns + [HF_WEIGHTS[0]], etag_timeout=_DOWNLOAD_TIMEOUT_S)
        if not os.path.exists(os.path.join(directory, HF_WEIGHTS[0])) and not offline:
            # An older repository without safetensors: its PyTorch pickle (needs torch).
            directory = huggingface_hub.snapshot_download(
                repo_id, revision=revision, cache_dir=cache_dir,
                allow_patterns=patterns + [HF_WEIGHTS[1]], etag_timeout=_DOWNLOAD_TIMEOUT_S)
    except Exception as e:  # the hub client raises many types (HTTP, connection, cache misses)
        where = ("the local HuggingFace cache (offline mode)" if offline
                 else "the HuggingFace Hub")
        reason = (str(e).strip().splitlines() or [""])[0][:300]
        raise PretrainedNotFoundError(
            f"{name!r} is not a local directory and {repo_id} could not be taken from {where}: "
            f"{type(e).__name__}: {reason}. Download it where there is internet "
            f"(huggingface-cli download {repo_id}) and pass that directory, or a converted "
            "one.") from None
    return directory
