"""RACE multiple choice as a task: the original JSON layout -> 4 sequences per question ->
softmax.

Input: a JSON file, or a directory searched recursively for *.json / *.txt files, each holding
one RACE passage: {"article": str, "questions": [str], "options": [[str, str, str, str]],
"answers": ["A".."D"], "id": str}.

Each option becomes `article <sep> qa <sep> <cls>` (LEFT-padded, <cls> last), qa = the question
with "_" replaced by the option when it has a blank, else question + " " + option. qa keeps its
LAST max_qa_length tokens; the article keeps its first seq_len - 3 - len(qa) tokens. The
original truncated one shared article token list in place, so later options saw the article
cut for earlier ones (the option-aliasing bug); here every option truncates its own copy.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from xlnet_tf2.config_flags import RunConfigError
from xlnet_tf2.data.finetune_batches import global_batches_fn
from xlnet_tf2.models.xlnet_multiple_choice import MultipleChoiceModel
from xlnet_tf2.tasks import feature_cache, metrics
from xlnet_tf2.tasks.errors import TaskDataError
from xlnet_tf2.tasks.finetune_config import RaceConfig
from xlnet_tf2.tasks.finetuning import FinetuneTask, backbone_config, spm_model_of
from xlnet_tf2.tasks.losses import classification_loss
from xlnet_tf2.tasks.head_spec import HeadSpec
from xlnet_tf2.tasks.text_readers import read_json_file
from xlnet_tf2.tokenizers.packing import encode_sequence_pair
from xlnet_tf2.tokenizers.sentencepiece_tokenizer import SentencePieceTokenizer
from xlnet_tf2.training import distribution
from xlnet_tf2.training.inference import predict

ANSWER_LETTERS = "ABCD"


@dataclasses.dataclass(frozen=True)
class RaceExample:
    guid: str
    article: str
    question: str
    options: List[str]
    label: Optional[int]


def _files(path: str) -> List[str]:
    if not tf.io.gfile.exists(path):
        raise TaskDataError(path, None, "does not exist.")
    if not tf.io.gfile.isdir(path):
        return [path]
    found = []
    for directory, _, names in tf.io.gfile.walk(path):
        found.extend(os.path.join(directory, n) for n in sorted(names)
                     if n.endswith((".json", ".txt")))
    if not found:
        raise TaskDataError(path, None, "holds no .json/.txt RACE files.")
    return sorted(found)


def read_race(path: str, num_choices: int = 4) -> List[RaceExample]:
    examples = []
    for file in _files(path):
        passage = read_json_file(file)
        if not isinstance(passage, dict):
            raise TaskDataError(file, None, "expected a JSON object (one RACE passage).")
        for key in ("article", "questions", "options"):
            if key not in passage:
                raise TaskDataError(file, None, f"missing key {key!r}.")
        if not isinstance(passage["article"], str):
            raise TaskDataError(file, None, f'"article" must be text, got '
                                f"{type(passage['article']).__name__}.")
        for key in ("questions", "options") + (("answers",) if "answers" in passage else ()):
            if not isinstance(passage[key], list):
                raise TaskDataError(file, None, f'"{key}" must be a list, got '
                                    f"{passage[key]!r}.")
        questions, options = passage["questions"], passage["options"]
        answers = passage.get("answers")
        if len(options) != len(questions) or (answers is not None and len(answers) != len(questions)):
            raise TaskDataError(file, None, "questions, options and answers differ in length.")
        for i, question in enumerate(questions):
            record = f"question {i}"
            if not isinstance(question, str):
                raise TaskDataError(file, record, f"must be text, got {question!r}.")
            if not isinstance(options[i], list) or len(options[i]) != num_choices or \
                    not all(isinstance(o, str) for o in options[i]):
                raise TaskDataError(file, record, f"needs {num_choices} text options, got "
                                    f"{options[i]!r}.")
            label = None
            if answers is not None:
                letters = ANSWER_LETTERS[:num_choices]
                if answers[i] not in letters:
                    raise TaskDataError(file, record, f"answer {answers[i]!r} is not one of "
                                        f"{list(letters)}.")
                label = letters.index(answers[i])
            examples.append(RaceExample(f"{passage.get('id', os.path.basename(file))}-{i}",
                                        passage["article"], question, list(options[i]), label))
    return examples


def qa_text(question: str, option: str) -> str:
    return question.replace("_", option) if "_" in question else question + " " + option


def encode_example(example: RaceExample, tokenizer: SentencePieceTokenizer, seq_len: int,
                   max_qa_length: int) -> Dict[str, np.ndarray]:
    """int32 [C, seq_len] input_ids, segment_ids, attention_mask."""
    article = tokenizer.encode_ids(example.article)
    rows = []
    for option in example.options:
        qa = tokenizer.encode_ids(qa_text(example.question, option))[-max_qa_length:] \
            if max_qa_length > 0 else []
        context = article[:max(seq_len - 3 - len(qa), 0)]  # a fresh slice per option
        rows.append(encode_sequence_pair(context, qa, seq_len, "cls_last"))
    return {k: np.stack([r[k] for r in rows]) for k in rows[0]}


def build_features(examples: Sequence[RaceExample], tokenizer, seq_len: int,
                   max_qa_length: int) -> Dict[str, np.ndarray]:
    encoded = [encode_example(e, tokenizer, seq_len, max_qa_length) for e in examples]
    features = {k: np.stack([e[k] for e in encoded]) for k in encoded[0]}
    if all(e.label is not None for e in examples):
        features["label"] = np.asarray([e.label for e in examples], np.int32)
    return features


class RaceTask(FinetuneTask):
    """RACE multiple choice from a RaceConfig: passages -> C sequences per question
    (tokenized once, feature cache) -> MultipleChoiceModel, softmax over the options,
    evaluated by accuracy."""

    EVALUATION_DATA = "--eval_path"

    def __init__(self, config: RaceConfig):
        if not config.train_path:
            raise RunConfigError("--train_path is required when training (--do_train).")
        xlnet_config, spm_model = backbone_config(config), spm_model_of(config)
        spec = HeadSpec(kind="race", seq_len=config.seq_len, max_qa_length=config.max_qa_length,
                        lower=config.lower)
        tokenizer = SentencePieceTokenizer.from_file(spm_model, lower=spec.lower)
        train = race_features("train", config.train_path, spec, tokenizer, config)
        super().__init__(
            config, model_fn=lambda: MultipleChoiceModel(
                xlnet_config, spec.num_choices, spec.summary_type,
                head_dropout=config.head_dropout),
            loss_fn=classification_loss,
            dataset_fn=global_batches_fn(train, config.train_batch_size, config.seed),
            eval_fn=self.evaluation(config, spec, tokenizer), seq_len=spec.seq_len,
            tokens_per_example=spec.seq_len * spec.num_choices, spec=spec, spm_model=spm_model)

    @classmethod
    def evaluation(cls, config: RaceConfig, spec: HeadSpec, tokenizer):
        if not config.eval_path:
            return None
        evaluation = race_features("eval", config.eval_path, spec, tokenizer, config)

        def evaluate(model):
            logits = predict(model, evaluation, config.eval_batch_size)["logits"]
            return {"accuracy": metrics.accuracy(evaluation["label"], logits.argmax(-1))}

        return evaluate


def race_features(name: str, path: str, spec: HeadSpec, tokenizer, config: RaceConfig):
    """The features of the passages at `path` laid out as `spec` says, with their answers
    (passages without "answers" are refused), through the feature cache."""
    examples = read_race(path, spec.num_choices)
    features = feature_cache.cached_features(
        name, {"examples": feature_cache.examples_fingerprint(examples),
               "spm": tokenizer.checksum, "spec": dataclasses.asdict(spec)},
        lambda: build_features(examples, tokenizer, spec.seq_len, spec.max_qa_length),
        config.feature_cache_dir, distribution.is_chief(tf.distribute.get_strategy()))
    if "label" not in features:
        raise TaskDataError(path, None, "the passages need \"answers\" (one letter per "
                            "question) to train or evaluate on.")
    return features
