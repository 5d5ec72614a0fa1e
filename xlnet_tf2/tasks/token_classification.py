"""Token classification (NER, tagging) as a task: CoNLL-format files -> one sequence per
sentence with a label on each word's first piece -> TokenClassifier, evaluated by entity-level
precision/recall/F1 and token accuracy (tasks/entities.py).

A CoNLL file: one word per line, whitespace-separated columns, the tag in the last; a blank
line ends a sentence; `-DOCSTART-` lines are skipped. A word's pieces after its first carry the
label IGNORE, as do the special tokens and the padding: the loss and the predictions read first
pieces only. The sequence is `pieces <sep> <cls>`, left-padded (the layout of every task).
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Dict, List, Sequence, Tuple

import numpy as np
import tensorflow as tf

from xlnet_tf2 import fileio
from xlnet_tf2 import special_ids as sid
from xlnet_tf2.config_flags import RunConfigError
from xlnet_tf2.data.finetune_batches import global_batches_fn
from xlnet_tf2.models.xlnet_token_classifier import IGNORE, TokenClassifier
from xlnet_tf2.tasks import feature_cache
from xlnet_tf2.tasks.entities import entity_scores
from xlnet_tf2.tasks.errors import TaskDataError
from xlnet_tf2.tasks.finetuning import (FinetuneTask, backbone_config, backbone_tokenizer,
                                        spm_model_of)
from xlnet_tf2.tasks.head_spec import HeadSpec
from xlnet_tf2.tasks.losses import token_classification_loss
from xlnet_tf2.tasks.token_classification_config import TokenClassificationConfig
from xlnet_tf2.training import distribution
from xlnet_tf2.training.inference import predict

KIND = "token_classification"  # task.json's kind; its declaration: task_registry.py


@dataclasses.dataclass(frozen=True)
class Sentence:
    words: Tuple[str, ...]
    tags: Tuple[str, ...]
    line: int  # the file's line of its first word (1-based), for messages


def read_conll(path: str) -> List[Sentence]:
    """The sentences of a CoNLL file; a word line without a tag column, or a file with no
    sentence, raises TaskDataError naming the file and line."""
    if not fileio.exists(path):
        raise TaskDataError(path, None, "does not exist.")
    with fileio.open_file(path) as f:
        lines = f.read().splitlines()
    sentences, words, tags, first = [], [], [], 0
    for number, line in enumerate(lines + [""], start=1):
        columns = line.split()
        if not columns or columns[0] == "-DOCSTART-":
            if words:
                sentences.append(Sentence(tuple(words), tuple(tags), first))
            words, tags = [], []
            continue
        if len(columns) < 2:
            raise TaskDataError(path, f"line {number}", f"{line.strip()!r} has no tag: each "
                                "line holds a word and its tag (the last column).")
        if not words:
            first = number
        words.append(columns[0])
        tags.append(columns[-1])
    if not sentences:
        raise TaskDataError(path, None, "holds no sentence (one word and its tag per line, a "
                            "blank line between sentences).")
    return sentences


def label_list_of(sentences: Sequence[Sentence]) -> List[str]:
    """The training file's tags, "O" first when present, then sorted."""
    tags = {t for s in sentences for t in s.tags}
    return sorted(tags, key=lambda t: (t != "O", t))


def encode_words(words: Sequence[str], tokenizer, seq_len: int) -> Tuple[Dict[str, np.ndarray],
                                                                        np.ndarray]:
    """(input_ids, segment_ids, attention_mask: int32 [seq_len]; the position of each word's
    first piece, int32 [W], -1 for a word cut off by seq_len)."""
    pieces: List[int] = []
    starts = []
    for word in words:
        ids = tokenizer.encode_ids(word) or [sid.UNK_ID]
        fits = len(pieces) + len(ids) <= seq_len - 2
        starts.append(len(pieces) if fits else -1)
        if fits:
            pieces.extend(ids)
        else:
            break
    starts += [-1] * (len(words) - len(starts))
    tokens = pieces + [sid.SEP_ID, sid.CLS_ID]
    pad = seq_len - len(tokens)
    encoded = {"input_ids": np.asarray([sid.PAD_ID] * pad + tokens, np.int32),
               "segment_ids": np.asarray([sid.SEG_ID_PAD] * pad + [sid.SEG_ID_A] * (len(pieces) + 1)
                                         + [sid.SEG_ID_CLS], np.int32),
               "attention_mask": np.asarray([0] * pad + [1] * len(tokens), np.int32)}
    positions = np.asarray([s + pad if s >= 0 else -1 for s in starts], np.int32)
    return encoded, positions


# The label of an evaluation word whose tag the model does not know (not in its label_list):
# it marks the word's first piece as IGNORE's other values do not, so its prediction is read
# and scored against the gold tag, which it never equals (conlleval's rule: such entities
# count as missed). Only evaluation features carry it; the loss never reads them.
UNSEEN_TAG = -2


def tag_ids(sentences: Sequence[Sentence], label_list: Sequence[str], source: str
            ) -> List[List[int]]:
    """Each sentence's tag ids; a tag outside label_list raises TaskDataError naming its line."""
    index = {t: i for i, t in enumerate(label_list)}
    out = []
    for s in sentences:
        for offset, tag in enumerate(s.tags):
            if tag not in index:
                raise TaskDataError(source, f"line {s.line + offset}", f"tag {tag!r} is not "
                                    f"among the model's tags {list(label_list)}.")
        out.append([index[t] for t in s.tags])
    return out


def eval_tag_ids(sentences: Sequence[Sentence], label_list: Sequence[str], source: str
                 ) -> List[List[int]]:
    """Each evaluation sentence's tag ids, UNSEEN_TAG for a tag the model does not know; those
    tags are named in one warning line on stderr (their words are scored as missed)."""
    index = {t: i for i, t in enumerate(label_list)}
    unseen = sorted({t for s in sentences for t in s.tags if t not in index})
    if unseen:
        words = sum(t in unseen for s in sentences for t in s.tags)
        print(f"warning: {source}: tags {unseen} ({words} word{'s' * (words != 1)}) are not "
              f"among the model's tags {list(label_list)}: scored as missed, as conlleval "
              "scores them.", file=sys.stderr, flush=True)
    return [[index.get(t, UNSEEN_TAG) for t in s.tags] for s in sentences]


def build_features(sentences: Sequence[Sentence], tokenizer, seq_len: int,
                   ids: Sequence[Sequence[int]]) -> Dict[str, np.ndarray]:
    """Model inputs [E, L] and "label" [E, L] (each word's tag id at its first piece, IGNORE
    elsewhere)."""
    rows, labels = [], []
    for sentence, sentence_ids in zip(sentences, ids):
        encoded, positions = encode_words(sentence.words, tokenizer, seq_len)
        label = np.full([seq_len], IGNORE, np.int32)
        kept = positions >= 0
        label[positions[kept]] = np.asarray(sentence_ids, np.int32)[kept]
        rows.append(encoded)
        labels.append(label)
    features = {k: np.stack([r[k] for r in rows]) for k in rows[0]}
    features["label"] = np.stack(labels)
    return features


def word_tags(logits: np.ndarray, features: Dict[str, np.ndarray], label_list: Sequence[str],
              lengths: Sequence[int]) -> List[List[str]]:
    """Each sentence's predicted tags from logits [E, L, C]: the argmax at every labeled
    position in order (the words' first pieces, UNSEEN_TAG's too), "O" for the words cut
    off."""
    best = logits.argmax(-1)
    out = []
    for row, label, length in zip(best, features["label"], lengths):
        tags = [label_list[i] for i in row[label != IGNORE]]
        out.append(tags + ["O"] * (length - len(tags)))
    return out


def evaluate(model, features, sentences: Sequence[Sentence], label_list: Sequence[str],
             batch_size: int) -> Dict[str, float]:
    logits = predict(model, features, batch_size)["logits"]
    predicted = word_tags(logits, features, label_list, [len(s.words) for s in sentences])
    return entity_scores([list(s.tags) for s in sentences], predicted)


class TokenClassificationTask(FinetuneTask):
    """Token classification from a TokenClassificationConfig: CoNLL files -> TokenClassifier,
    evaluated by entity F1 (the best metric), precision, recall and token accuracy."""

    EVALUATION_DATA = "--eval_file"

    def __init__(self, config: TokenClassificationConfig):
        if not config.train_file:
            raise RunConfigError("--train_file is required when training (--do_train).")
        xlnet_config, spm_model = backbone_config(config), spm_model_of(config)
        train_sentences = read_conll(config.train_file)
        label_list = label_list_of(train_sentences)
        spec = HeadSpec(kind=KIND, seq_len=config.seq_len, label_list=label_list,
                        lower=config.lower)
        tokenizer = backbone_tokenizer(spm_model, spec.lower, xlnet_config)
        train = conll_features("train", train_sentences,
                               tag_ids(train_sentences, label_list, config.train_file), spec,
                               tokenizer, config)
        super().__init__(
            config, model_fn=lambda: TokenClassifier(xlnet_config, len(label_list),
                                                     head_dropout=config.head_dropout),
            loss_fn=token_classification_loss,
            dataset_fn=global_batches_fn(train, config.train_batch_size, config.seed),
            eval_fn=self.evaluation(config, spec, tokenizer), seq_len=spec.seq_len, spec=spec,
            spm_model=spm_model)

    @classmethod
    def evaluation(cls, config: TokenClassificationConfig, spec: HeadSpec, tokenizer):
        """Entity F1 of --eval_file; a tag the model does not know is scored as missed, with
        one warning line (eval_tag_ids)."""
        if not config.eval_file:
            return None
        sentences = read_conll(config.eval_file)
        ids = eval_tag_ids(sentences, spec.label_list, config.eval_file)
        features = conll_features("eval", sentences, ids, spec, tokenizer, config)
        return lambda model: evaluate(model, features, sentences, spec.label_list,
                                      config.eval_batch_size)


def conll_features(name: str, sentences: Sequence[Sentence], ids, spec: HeadSpec, tokenizer,
                   config: TokenClassificationConfig) -> Dict[str, np.ndarray]:
    """build_features of `sentences` with their tag `ids`, through the feature cache (the ids
    follow from the sentences' tags and the spec's label_list, both in the key)."""
    return feature_cache.cached_features(
        name, {"examples": feature_cache.examples_fingerprint(sentences),
               "spm": tokenizer.checksum, "spec": dataclasses.asdict(spec)},
        lambda: build_features(sentences, tokenizer, spec.seq_len, ids),
        config.feature_cache_dir, distribution.is_chief(tf.distribute.get_strategy()))
