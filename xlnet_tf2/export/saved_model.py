"""SavedModel export for TF Serving: `serving_default` (raw UTF-8 text in) and
`serve_token_ids` (ids, segment ids and mask in), with the same outputs. The signatures'
outputs: `ServingModule`; the directory layout: `export`; how to serve it:
docs/FINETUNING.md#serving.
"""

from __future__ import annotations

import json
import os
from typing import Callable, Optional, Union

import tensorflow as tf

from xlnet_tf2 import fileio, task_registry
from xlnet_tf2.export import feature_extraction
from xlnet_tf2.export.export_config import EXPORT_KINDS, ExportConfig
from xlnet_tf2.models.xlnet_model import check_token_ids
from xlnet_tf2.tokenizers.packing import LAYOUTS
from xlnet_tf2.tasks.finetuned_model import FeatureSpec, load_task_model
from xlnet_tf2.tasks.head_spec import HeadSpec
from xlnet_tf2.tokenizers.xlnet_preprocessor import XLNetPreprocessor
from xlnet_tf2.export import serving_tasks
# Each module of a declared task's signature builder (task_registry's `serving`) besides
# serving_tasks, imported so `signatures_of` finds it.
from xlnet_tf2.export import token_classification_serving  # noqa: F401


def signatures_of(kind: str) -> Callable:
    """The signature builder of an export of `kind` ("features": the text signatures, on the
    backbone; else a task's name): the function its task's declaration names; an undeclared
    kind, or one whose builder no imported module defines, raises ValueError."""
    path = ("xlnet_tf2.export.serving_tasks.text_signatures" if kind == "features"
            else task_registry.declared(kind).serving)
    if path not in serving_tasks.BUILDERS:
        raise ValueError(f"task {kind!r} declares serving {path}, which no imported module "
                         "defines: import its module in xlnet_tf2/export/saved_model.py.")
    return serving_tasks.BUILDERS[path]


class ServingModule(tf.Module):
    """The exported object: the task model, the tokenizer and the signatures.

    Text inputs are normalized, tokenized and laid out in-graph by the Keras preprocessing
    layer `XLNetPreprocessor` (the in-graph SentencePiece op: same ids as
    xlnet_tf2.tokenizers.sentencepiece_tokenizer, same layout as training; SQuAD and RACE lay
    out their windows with serving_inputs.py). Over-long inputs are truncated exactly as in
    training: pairs drop tokens from the end of the longer text, a single text keeps its first
    seq_len-2 tokens; RACE keeps the last max_qa_length tokens of question+option and the
    first seq_len-3-len(qa) tokens of the article. An empty string is valid input.

    Outputs per task:
      classification: probabilities [B, C] float32, label_id [B] int32, label [B] string
      regression:     score [B] float32
      features:       token_features [B, L, D], pooled [B, D] (mean over real tokens),
                      input_ids / attention_mask [B, L] (which positions are real, left
                      padded)
      race:           probabilities [Q, C], label_id [Q] (index of the chosen option); text
                      inputs article [Q], question [Q], options [Q, C]
      squad:          text inputs question [B], context [B] (the whole context: every window,
                      doc_stride as in fine-tuning, as many as the longest context of the
                      request needs); answer [B] string (the RAW context substring, as
                      predictions.json), prediction [B] ("" when no_answer), start_index /
                      end_index [B] int32 (context token indices, -1 = none), answer_score,
                      no_answer_score [B] float32, no_answer [B] bool,
                      null_score_threshold [B], num_windows [B] int32; equal to the offline
                      prediction (xlnet_tf2.tasks.squad); see serving_tasks.squad_signatures
    """

    def __init__(self, kind: str, model, spec: Union[HeadSpec, FeatureSpec], spm_model: str):
        """`kind`: what the export serves (EXPORT_KINDS); `model`: the task model, or for kind
        "features" the backbone (XLNetModel); `spec`: its task.json (HeadSpec), or the
        features' FeatureSpec."""
        super().__init__(name="xlnet_serving")
        if kind not in EXPORT_KINDS:
            raise ValueError(f"--kind must be one of {EXPORT_KINDS}, got {kind!r}.")
        self.kind = kind
        self.model = model
        # Keras 3 variables are not tracked by tf.Module; track the tf.Variables explicitly so
        # the SavedModel restores them (the TF1 session loader of saved_model_cli and TF
        # Serving needs them in the object graph, not only captured by the functions).
        self.model_variables = [v.value for v in model.variables]
        self.spec = spec
        self.seq_len = spec.seq_len
        # The Keras preprocessing layer users can also put in tf.data or their own models;
        # SQuAD and RACE build their layouts from its tokenizer's ids.
        # (SQuAD's task.json says layout "squad": its windows are built in serving_tasks.)
        layout = spec.layout if spec.layout in LAYOUTS else "cls_last"
        self.preprocessor = XLNetPreprocessor(spm_model, spec.seq_len, layout,
                                              lower=spec.lower)
        self.tokenizer = self.preprocessor.tokenizer
        if kind == "classification":
            self.label_names = tf.constant(list(spec.label_list))

    # ------------------------------------------------------------------ shared pieces
    def _outputs(self, inputs):
        if self.kind == "features":
            return feature_extraction.feature_outputs(self.model, inputs)
        outputs = self.model(inputs, training=False)
        if self.kind == "classification":
            probabilities = tf.nn.softmax(outputs["logits"], axis=-1)
            label_id = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
            return {"probabilities": probabilities, "label_id": label_id,
                    "label": tf.gather(self.label_names, label_id)}
        if self.kind == "regression":
            return {"score": outputs["logits"][:, 0]}
        if self.kind == "race":
            probabilities = tf.nn.softmax(outputs["logits"], axis=-1)
            return {"probabilities": probabilities,
                    "label_id": tf.argmax(probabilities, axis=-1, output_type=tf.int32)}
        raise AssertionError(self.kind)

    def _checked_lengths(self, input_ids, segment_ids, attention_mask, axis: int = 1):
        """The three inputs once their length (dimension `axis`) is checked to be seq_len and
        every id to be in the vocabulary: the checks run before any op reads them, so a bad
        request gets one message naming the input (the SentencePiece op that spells SQuAD's
        answer would crash the server on an id outside the vocabulary)."""
        checks = [tf.debugging.assert_equal(tf.shape(x)[axis], self.seq_len, message=(
            f"serve_token_ids: {name} must hold sequences of exactly seq_len={self.seq_len} "
            "tokens")) for name, x in (("input_ids", input_ids), ("segment_ids", segment_ids),
                                       ("attention_mask", attention_mask))]
        with tf.control_dependencies(checks):
            input_ids = check_token_ids(input_ids, self.model.config.n_token)
            return (input_ids,) + tuple(tf.identity(x) for x in (segment_ids, attention_mask))

    # ------------------------------------------------------------------ signatures
    def signatures(self):
        """The signatures of the task's builder (its declaration's `serving`: signatures_of)."""
        return signatures_of(self.kind)(self)


def next_version(export_base: str) -> int:
    if tf.io.gfile.exists(export_base) and not tf.io.gfile.isdir(export_base):
        raise NotADirectoryError(f"--export_dir={export_base!r} is a file; pass the base "
                                 "directory of the versions (EXPORT_DIR/<version>/).")
    versions = [int(d) for d in (tf.io.gfile.listdir(export_base)
                                 if tf.io.gfile.exists(export_base) else [])
                if d.strip("/").isdigit()]
    return max(versions, default=0) + 1


def export(module: ServingModule, export_base: str, version: Optional[int] = None) -> str:
    """Writes EXPORT_BASE/<version>/ and returns that path (version: next free integer):
    EXPORT_BASE/<version>/{saved_model.pb, variables/, assets/spiece.model,
    assets.extra/task.json}; TF Serving loads EXPORT_BASE as a model base path.

    The version is written under a hidden staging name beside it (.<version>.tmp-...) and
    renamed into place when complete: TF Serving, which loads every numbered directory, never
    sees a version without saved_model.pb. What a killed export left is reported and
    removed."""
    version = next_version(export_base) if version is None else version
    path = os.path.join(export_base, str(version))
    if tf.io.gfile.exists(path):
        raise FileExistsError(f"{path} exists already; pick another --version.")
    for leftover in fileio.leftovers(path):
        print(f"[export] found {leftover}, an incomplete export left by a killed run; "
              "removing it.", flush=True)
        fileio.rmtree(leftover)
    signatures = module.signatures()
    staging = fileio.staging_directory(path)
    try:
        _write_version(module, signatures, staging)
        if tf.io.gfile.exists(path):
            raise FileExistsError(f"{path} appeared while exporting; pick another --version.")
        fileio.replace_directory(staging, path)
    except BaseException as e:
        fileio.rmtree(staging)
        raise fileio.output_error(e, path) or e
    return path


def _write_version(module: ServingModule, signatures, path: str) -> None:
    tf.saved_model.save(module, path, signatures=signatures)
    # The model file under assets/ and the bytes inside the SentencePiece op are the same.
    asset = os.path.join(path, "assets", os.path.basename(module.tokenizer.spm_model.asset_path.numpy().decode()))
    with tf.io.gfile.GFile(asset, "rb") as f:
        if f.read() != module.tokenizer.model_bytes:
            raise AssertionError(f"{asset} differs from the tokenizer model inside the graph.")
    extra = os.path.join(path, "assets.extra")
    tf.io.gfile.makedirs(extra)
    info = dict(kind=module.kind, seq_len=module.seq_len,
                signatures={k: {"inputs": sorted(s.structured_input_signature[1]),
                                "outputs": sorted(s.structured_outputs)}
                            for k, s in signatures.items()})
    if module.kind in task_registry.names() and task_registry.declared(module.kind).min_labels:
        info["label_list"] = list(module.spec.label_list)
    if module.kind == "squad":
        info.update(doc_stride=module.spec.doc_stride,
                    max_query_length=module.spec.max_query_length,
                    max_answer_length=module.spec.max_answer_length,
                    version_2_with_negative=module.spec.version_2_with_negative,
                    null_score_threshold=module.spec.null_score_threshold)
    fileio.write_atomically(os.path.join(extra, "task.json"),
                            (json.dumps(info, indent=2) + "\n").encode())


def export_model_dir(config: ExportConfig) -> str:
    """Exports config.model_dir (experiments/export_saved_model.py); returns the version's
    path."""
    model, spec, spm_model = load_task_model(config.model_dir, config.kind, config.checkpoint)
    if config.seq_len and config.kind == "features":
        spec = spec.replace(seq_len=config.seq_len)
    kind = config.kind or spec.kind  # task.json's unless --kind=features
    return export(ServingModule(kind, model, spec, spm_model), config.export_dir,
                  config.version)
