"""SQuAD 1.1/2.0 fine-tuning as a task: windows (squad_data.py) -> SquadModel -> beam
post-processing -> official metrics (squad_eval.py) and the prediction files.

Post-processing, per question over all its windows: every (start, end) pair of the head's
top-k starts x top-e ends (k = e = n_best_size) whose start and end are document tokens of
the window, end >= start, end - start + 1 <= max_answer_length, and whose start has its most
context in this window; score = start log-prob + end log-prob. The answer text is the RAW
context substring from the start token's first character to the end token's last one. The
no-answer score (`null_odds`) is the smallest answer-class logit over the question's windows
(larger = more likely unanswerable).

Files written to the output directory (model_dir by default):
  predictions.json        {qid: answer text}; SQuAD 2.0: "" when null_odds > the threshold
  null_odds.json          {qid: null_odds} (SQuAD 2.0)
  nbest_predictions.json  {qid: [{"text", "score", "start_token", "end_token"}...]}
The metrics are those of the official script run on the best non-null answers with these
null_odds and the threshold, so `best_exact`/`best_f1` search over all thresholds.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
from typing import Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from xlnet_tf2 import fileio
from xlnet_tf2.config_flags import RunConfigError
from xlnet_tf2.data.finetune_batches import global_batches_fn
from xlnet_tf2.models.xlnet_question_answerer import SquadModel
from xlnet_tf2.tasks import feature_cache, squad_eval
from xlnet_tf2.tasks.errors import TaskDataError
from xlnet_tf2.tasks.finetune_config import SquadConfig
from xlnet_tf2.tasks.finetuning import (FinetuneTask, backbone_config, backbone_tokenizer,
                                        spm_model_of)
from xlnet_tf2.tasks.losses import squad_loss
from xlnet_tf2.tasks.squad_data import (MODEL_INPUTS, SquadExample, SquadWindow,
                                        TokenizedContext, build_all_windows, read_squad,
                                        stack_windows)
from xlnet_tf2.tasks.head_spec import HeadSpec
from xlnet_tf2.tokenizers.sentencepiece_tokenizer import SPIECE_UNDERLINE, SentencePieceTokenizer
from xlnet_tf2.training import distribution
from xlnet_tf2.training.inference import predict

BEAM_OUTPUTS = ("start_top_log_probs", "start_top_index", "end_top_log_probs", "end_top_index",
                "cls_logits")


@dataclasses.dataclass(frozen=True)
class Candidate:
    text: str
    score: float
    start_token: int   # document token indices (of the whole context)
    end_token: int


def piece_text(pieces: Sequence[str], start: int, end: int) -> str:
    """The normalized text of pieces[start..end] (inclusive), as the SavedModel returns it."""
    return "".join(pieces[start:end + 1]).replace(SPIECE_UNDERLINE, " ").strip()


def window_candidates(window: SquadWindow, outputs: Dict[str, np.ndarray],
                      example: SquadExample, context: TokenizedContext,
                      max_answer_length: int) -> List[Candidate]:
    """Valid spans of one window's k x e beam (outputs: one row of BEAM_OUTPUTS)."""
    found = []
    k, e = outputs["end_top_index"].shape
    for i in range(k):
        start = int(outputs["start_top_index"][i])
        for j in range(e):
            end = int(outputs["end_top_index"][i, j])
            if start >= window.doc_length or end >= window.doc_length:
                continue
            if not window.max_context[start] or end < start or end - start + 1 > max_answer_length:
                continue
            first, last = window.doc_offset + start, window.doc_offset + end
            text = example.context[context.char_start[first]:context.char_end[last]]
            found.append(Candidate(text, float(outputs["start_top_log_probs"][i]
                                               + outputs["end_top_log_probs"][i, j]),
                                   first, last))
    return found


def postprocess(examples: Sequence[SquadExample], windows: Sequence[SquadWindow],
                contexts: Sequence[TokenizedContext], outputs: Dict[str, np.ndarray],
                max_answer_length: int, n_best_size: int):
    """(best non-null text per qid, null_odds per qid, n-best candidates per qid)."""
    by_example = collections.defaultdict(list)
    for row, window in enumerate(windows):
        by_example[window.example_index].append(row)
    best, null_odds, nbest = {}, {}, {}
    for index, example in enumerate(examples):
        rows = by_example[index]
        candidates = []
        for row in rows:
            candidates += window_candidates(windows[row], {k: v[row] for k, v in outputs.items()},
                                            example, contexts[index], max_answer_length)
        candidates.sort(key=lambda c: -c.score)  # stable: beam order breaks ties
        kept, texts = [], set()
        for c in candidates:
            if c.text not in texts:
                texts.add(c.text)
                kept.append(c)
            if len(kept) == n_best_size:
                break
        best[example.qid] = kept[0].text if kept else ""
        null_odds[example.qid] = float(min(outputs["cls_logits"][r] for r in rows))
        nbest[example.qid] = kept
    return best, null_odds, nbest


def final_predictions(best: Dict[str, str], null_odds: Dict[str, float], version_2: bool,
                      null_threshold: float) -> Dict[str, str]:
    if not version_2:
        return dict(best)
    return {q: ("" if null_odds[q] > null_threshold else text) for q, text in best.items()}


def write_predictions(output_dir: str, predictions, null_odds, nbest, version_2: bool) -> None:
    tf.io.gfile.makedirs(output_dir)
    files = {"predictions.json": predictions,
             "nbest_predictions.json": {q: [dataclasses.asdict(c) for c in cs]
                                        for q, cs in nbest.items()}}
    if version_2:
        files["null_odds.json"] = null_odds
    for name, value in files.items():
        fileio.write_atomically(os.path.join(output_dir, name),
                                (json.dumps(value, indent=1, ensure_ascii=False) + "\n").encode())


# ---------------------------------------------------------------------------- feature cache
WINDOW_SETTINGS = ("seq_len", "doc_stride", "max_query_length", "version_2_with_negative", "lower")
WINDOW_ARRAYS = ("example_index", "doc_offset", "doc_length", "max_context", "char_start",
                 "char_end")


def cache_key(split: str, path: str, tokenizer: SentencePieceTokenizer, spec) -> dict:
    """What a SQuAD file's windows (of `split`: train or eval) depend on: the file's content,
    the SentencePiece model and the window settings (not the prediction settings:
    n_best_size, thresholds, ...)."""
    if not tf.io.gfile.exists(path):
        raise TaskDataError(path, None, "does not exist.")
    return {"features": f"squad_{split}", "file": feature_cache.file_fingerprint(path),
            "spm": tokenizer.checksum,
            "windows": {k: getattr(spec, k) for k in WINDOW_SETTINGS}}


def window_arrays(windows: Sequence[SquadWindow], contexts: Sequence[TokenizedContext],
                  seq_len: int) -> Dict[str, np.ndarray]:
    """Windows as fixed-shape arrays (the model inputs and labels of stack_windows, plus what
    post-processing needs: example_index, doc_offset, doc_length [E], and per window position
    max_context and the raw character span char_start / char_end [E, L] of its document
    token), so an evaluation set can be cached and rebuilt with `windows_from_arrays`."""
    arrays = stack_windows(windows, with_labels=True)
    n = len(windows)
    arrays["example_index"] = np.asarray([w.example_index for w in windows], np.int32)
    arrays["doc_offset"] = np.asarray([w.doc_offset for w in windows], np.int32)
    arrays["doc_length"] = np.asarray([w.doc_length for w in windows], np.int32)
    for name in ("max_context", "char_start", "char_end"):
        arrays[name] = np.zeros([n, seq_len], np.int32)
    for row, w in enumerate(windows):
        context, span = contexts[w.example_index], slice(w.doc_offset, w.doc_offset + w.doc_length)
        arrays["max_context"][row, :w.doc_length] = w.max_context
        arrays["char_start"][row, :w.doc_length] = context.char_start[span]
        arrays["char_end"][row, :w.doc_length] = context.char_end[span]
    return arrays


def windows_from_arrays(examples: Sequence[SquadExample], arrays: Dict[str, np.ndarray],
                        tokenizer: SentencePieceTokenizer):
    """(windows, contexts) back from `window_arrays`. A context's pieces are the vocabulary's
    pieces of its ids (a character unknown to the model shows as <unk>, not as itself); ids,
    character spans and everything prediction uses are the originals."""
    windows = []
    tokens: Dict[int, Dict[int, tuple]] = collections.defaultdict(dict)
    for row in range(len(arrays["example_index"])):
        index, offset = int(arrays["example_index"][row]), int(arrays["doc_offset"][row])
        length = int(arrays["doc_length"][row])
        if not 0 <= index < len(examples):
            raise ValueError(f"cached window {row} names example {index} of {len(examples)}")
        windows.append(SquadWindow(
            index, examples[index].qid, offset, length,
            [bool(x) for x in arrays["max_context"][row, :length]],
            {k: arrays[k][row] for k in MODEL_INPUTS}, int(arrays["start_positions"][row]),
            int(arrays["end_positions"][row]), bool(arrays["is_impossible"][row])))
        for i in range(length):
            tokens[index][offset + i] = (int(arrays["input_ids"][row, i]),
                                         int(arrays["char_start"][row, i]),
                                         int(arrays["char_end"][row, i]))
    contexts = []
    for index in range(len(examples)):
        known = tokens[index]
        rows = [known[t] for t in range(len(known))]
        ids = [r[0] for r in rows]
        contexts.append(TokenizedContext([tokenizer.id_to_piece(i) for i in ids], ids,
                                         [r[1] for r in rows], [r[2] for r in rows]))
    return windows, contexts


@dataclasses.dataclass
class SquadEvalSet:
    """A prediction file, tokenized once: examples, their windows and model inputs."""
    examples: List[SquadExample]
    windows: List[SquadWindow]
    contexts: List[TokenizedContext]
    features: Dict[str, np.ndarray]

    @classmethod
    def build(cls, path: str, tokenizer: SentencePieceTokenizer, spec,
              cache_dir: Optional[str] = "off", is_chief: bool = True) -> "SquadEvalSet":
        """Reads and tokenizes `path`; with a cache_dir (None: the default one; "off": none)
        the windows come from / go to the feature cache (feature_cache.py)."""
        examples = read_squad(path, spec.version_2_with_negative)

        def build_arrays():
            windows, contexts = build_all_windows(examples, tokenizer, spec.seq_len,
                                                  spec.doc_stride, spec.max_query_length, path)
            return window_arrays(windows, contexts, spec.seq_len)

        if cache_dir == feature_cache.DISABLED:
            windows, contexts = build_all_windows(examples, tokenizer, spec.seq_len,
                                                  spec.doc_stride, spec.max_query_length, path)
        else:
            arrays = feature_cache.cached_features("eval", cache_key("eval", path, tokenizer,
                                                                     spec),
                                                   build_arrays, cache_dir, is_chief)
            windows, contexts = windows_from_arrays(examples, arrays, tokenizer)
        return cls(examples, windows, contexts, stack_windows(windows, with_labels=False))


def predict_and_evaluate(model, data: SquadEvalSet, spec, batch_size: int,
                         output_dir: Optional[str]) -> Dict[str, float]:
    """Runs the model over all windows, writes the prediction files (if output_dir) and
    returns the official metrics (exact, f1[, HasAns_*, NoAns_*, best_*])."""
    outputs = predict(model, data.features, batch_size, output_keys=BEAM_OUTPUTS)
    best, null_odds, nbest = postprocess(data.examples, data.windows, data.contexts, outputs,
                                         spec.max_answer_length, spec.n_best_size)
    version_2 = spec.version_2_with_negative
    predictions = final_predictions(best, null_odds, version_2, spec.null_score_threshold)
    if output_dir:
        write_predictions(output_dir, predictions, null_odds, nbest, version_2)
    golds = {e.qid: ([] if e.is_impossible else e.answer_texts) for e in data.examples}
    if version_2:
        return squad_eval.evaluate(golds, best, null_odds, spec.null_score_threshold)
    return squad_eval.evaluate(golds, predictions)


def train_features(path: str, tokenizer, spec, cache_dir: Optional[str] = "off",
                   is_chief: bool = True) -> Dict[str, np.ndarray]:
    """Model inputs and labels of every window of `path` (stack_windows); with a cache_dir
    (None: the default one; "off": none) tokenized once across runs and workers."""
    def build():
        examples = read_squad(path, spec.version_2_with_negative)
        windows, _ = build_all_windows(examples, tokenizer, spec.seq_len, spec.doc_stride,
                                       spec.max_query_length, path)
        return stack_windows(windows, with_labels=True)

    if cache_dir == feature_cache.DISABLED:
        return build()
    return feature_cache.cached_features("train", cache_key("train", path, tokenizer, spec),
                                         build, cache_dir, is_chief)


def squad_spec(config: SquadConfig) -> HeadSpec:
    """task.json of a SQuAD run: the window and prediction settings."""
    return HeadSpec(kind="squad", seq_len=config.seq_len, layout="squad", lower=config.lower,
                    version_2_with_negative=config.version_2_with_negative,
                    doc_stride=config.doc_stride, max_query_length=config.max_query_length,
                    max_answer_length=config.max_answer_length,
                    n_best_size=config.n_best_size,
                    null_score_threshold=config.null_score_threshold)


class SquadTask(FinetuneTask):
    """SQuAD fine-tuning from a SquadConfig: trains on --train_file, evaluating on
    --predict_file every eval_every steps (the prediction files of each evaluation overwrite
    the previous ones)."""

    EVALUATION_DATA = "--predict_file"

    def __init__(self, config: SquadConfig):
        if not config.train_file:
            raise RunConfigError("--train_file is required when training (--do_train).")
        xlnet_config, spm_model = backbone_config(config), spm_model_of(config)
        spec = squad_spec(config)
        tokenizer = backbone_tokenizer(spm_model, spec.lower, xlnet_config)
        is_chief = distribution.is_chief(tf.distribute.get_strategy())  # run_task's, in its scope
        train = train_features(config.train_file, tokenizer, spec, config.feature_cache_dir,
                               is_chief)
        super().__init__(
            config, model_fn=lambda: SquadModel(xlnet_config, spec.n_best_size,
                                                spec.n_best_size,
                                                head_dropout=config.head_dropout),
            loss_fn=squad_loss,
            dataset_fn=global_batches_fn(train, config.train_batch_size, config.seed),
            eval_fn=self.evaluation(config, spec, tokenizer), seq_len=spec.seq_len, spec=spec,
            spm_model=spm_model)

    @classmethod
    def evaluation(cls, config: SquadConfig, spec: HeadSpec, tokenizer):
        """Predicts --predict_file and scores it with the official metrics; the prediction
        files go to --output_dir (default --model_dir)."""
        if not config.predict_file:
            return None
        evaluation = SquadEvalSet.build(config.predict_file, tokenizer, spec,
                                        config.feature_cache_dir,
                                        distribution.is_chief(tf.distribute.get_strategy()))
        return lambda model: predict_and_evaluate(model, evaluation, spec,
                                                  config.eval_batch_size,
                                                  config.output_dir or config.model_dir)
