"""Loading a pretrained XLNet by directory or name: `from_pretrained`.

    model = xlnet_tf2.from_pretrained("path/to/dir", mem_len=384)

`name_or_dir` may be
  - a directory this project wrote: a converted release (model.ckpt.*), a pretraining or
    fine-tuning model_dir (its latest checkpoint): xlnet_config.json + a checkpoint;
  - a HuggingFace `save_pretrained` directory (config.json + model.safetensors, read without
    torch, or pytorch_model.bin, which needs torch): converted on the fly;
  - an original zihangdai/xlnet release directory (xlnet_model.ckpt.*, xlnet_config.json,
    spiece.model): converted on the fly;
  - a HuggingFace Hub repository id ("owner/name") or one of the release names in
    `PRETRAINED` ("xlnet-base-cased", "xlnet-large-cased"): taken from the local hub cache,
    else downloaded with the `huggingface_hub` package (imported only then; it is not a
    requirement of this library), then converted on the fly. With HF_HUB_OFFLINE=1 only the
    cache is looked at.
The directory holds the architecture only; run-time settings (mem_len, dropout, ...) are
keyword arguments, as for `load_pretrained`.

Release names are also architecture presets: `from_pretrained("xlnet-base-cased",
load_weights=False)` builds that architecture with fresh weights and needs nothing on disk.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import shutil
import tempfile
from typing import Optional

import tensorflow as tf

from xlnet_tf2.config import RUNTIME_KEYS, XLNetConfig
from xlnet_tf2.conversion import pretrained as converted

ORIGINAL_PREFIX = "xlnet_model.ckpt"
HF_CONFIG = "config.json"
HF_WEIGHTS = ("model.safetensors", "pytorch_model.bin")
KINDS = ("converted", "huggingface", "original")
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
    """A local directory holding a model, and which layout it has (one of KINDS)."""
    directory: str
    kind: str

    def spm_model(self) -> str:
        path = os.path.join(self.directory, converted.SPM_NAME)
        if not tf.io.gfile.exists(path):
            raise PretrainedNotFoundError(
                f"{self.directory} holds no {converted.SPM_NAME} (the SentencePiece model); "
                "copy the model's spiece.model there.")
        return path


def pretrained_config(name: str, **runtime) -> XLNetConfig:
    """The architecture of a release name ("xlnet-base-cased", "xlnet-large-cased") with
    run-time settings."""
    if name not in PRETRAINED:
        raise PretrainedNotFoundError(f"Unknown release name {name!r}; known: "
                                      f"{sorted(PRETRAINED)}.")
    return XLNetConfig.preset(PRETRAINED[name].preset, **_check_runtime(runtime))


def detect_kind(directory: str) -> Optional[str]:
    """Which layout a directory has (one of KINDS), or None."""
    def has(name):
        return tf.io.gfile.exists(os.path.join(directory, name))

    if has(converted.CONFIG_NAME) and has(ORIGINAL_PREFIX + ".index"):
        return "original"
    if has(converted.CONFIG_NAME) and (has(converted.CHECKPOINT_PREFIX + ".index")
                                       or tf.train.latest_checkpoint(directory)):
        return "converted"
    if has(HF_CONFIG) and any(has(w) for w in HF_WEIGHTS):
        return "huggingface"
    return None


def resolve(name_or_dir: str, *, cache_dir: Optional[str] = None,
            revision: Optional[str] = None, local_files_only: bool = False) -> Resolved:
    """The local model directory for a directory, release name or hub repository id."""
    if tf.io.gfile.isdir(name_or_dir):
        kind = detect_kind(name_or_dir)
        if kind is None:
            raise PretrainedNotFoundError(
                f"{name_or_dir} holds no model: expected xlnet_config.json with a checkpoint "
                f"(this project's or the original release's {ORIGINAL_PREFIX}.*), or a "
                f"HuggingFace {HF_CONFIG} with {' or '.join(HF_WEIGHTS)}.")
        return Resolved(name_or_dir, kind)
    if name_or_dir in PRETRAINED:
        repo_id = PRETRAINED[name_or_dir].repo_id
    elif _REPO_ID.match(name_or_dir):
        repo_id = name_or_dir
    else:
        raise PretrainedNotFoundError(
            f"{name_or_dir!r} is not a directory, a HuggingFace Hub repository id (owner/name) "
            f"or a release name ({', '.join(sorted(PRETRAINED))}).")
    directory = _download(name_or_dir, repo_id, cache_dir, revision, local_files_only)
    kind = detect_kind(directory)
    if kind != "huggingface":
        raise PretrainedNotFoundError(f"The hub repository {repo_id} has no {HF_CONFIG} with "
                                      f"{' or '.join(HF_WEIGHTS)} (found in {directory}).")
    return Resolved(directory, kind)


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
    patterns = [HF_CONFIG, converted.SPM_NAME]
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


def _check_runtime(runtime: dict) -> dict:
    architecture = sorted(k for k in runtime if k not in RUNTIME_KEYS)
    if architecture:
        raise ValueError(f"from_pretrained takes run-time settings only ({', '.join(RUNTIME_KEYS)}); "
                         f"{architecture} come from the model directory.")
    return runtime


def from_pretrained(name_or_dir: str, *, load_weights: bool = True,
                    cache_dir: Optional[str] = None, revision: Optional[str] = None,
                    local_files_only: bool = False, **runtime):
    """A ready `XLNetLMHeadModel` (see the module docstring for what `name_or_dir` may be).

    Args:
      load_weights: False builds the architecture of a release name or of a directory's
        xlnet_config.json with fresh weights (nothing is read or downloaded for a name).
      cache_dir, revision, local_files_only: passed to huggingface_hub for repository ids.
      **runtime: run-time settings (mem_len, reuse_len, dropout, dropatt, bi_data, clamp_len,
        attn_type, same_length, initializer_range).
    """
    from xlnet_tf2.conversion.convert import convert_checkpoint
    from xlnet_tf2.models import XLNetLMHeadModel

    _check_runtime(runtime)
    if not load_weights:
        if name_or_dir in PRETRAINED and not tf.io.gfile.isdir(name_or_dir):
            config = pretrained_config(name_or_dir, **runtime)
        else:
            path = os.path.join(name_or_dir, converted.CONFIG_NAME)
            if not tf.io.gfile.exists(path):
                raise PretrainedNotFoundError(
                    f"load_weights=False needs a release name ({', '.join(sorted(PRETRAINED))}) "
                    f"or a directory with {converted.CONFIG_NAME}; {path} does not exist.")
            config = XLNetConfig.from_json_file(path, **runtime)
        model = XLNetLMHeadModel(config)
        model.build()
        return model
    resolved = resolve(name_or_dir, cache_dir=cache_dir, revision=revision,
                       local_files_only=local_files_only)
    if resolved.kind == "converted":
        return converted.load_pretrained(resolved.directory, **runtime)
    directory = resolved.directory
    spm = os.path.join(directory, converted.SPM_NAME)
    spm = spm if tf.io.gfile.exists(spm) else None
    scratch = tempfile.mkdtemp(prefix="xlnet_tf2_convert_")
    try:
        if resolved.kind == "huggingface":
            convert_checkpoint("huggingface", directory, scratch, spm_model=spm,
                               log=logging.getLogger(__name__).info)
        else:
            convert_checkpoint("original", os.path.join(directory, ORIGINAL_PREFIX), scratch,
                               config_path=os.path.join(directory, converted.CONFIG_NAME),
                               spm_model=spm, log=logging.getLogger(__name__).info)
        return converted.load_pretrained(scratch, **runtime)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
