"""The typed configuration trees of the fine-tuning tasks; every flag of run_classifier.py,
run_squad.py and run_race.py is a leaf of one of them (help, default, validation and resume
policy on the field). This module imports no TensorFlow, so `--help` stays fast.

    FinetuneConfig                    what every fine-tuning task shares
      init_checkpoint, model_config, spm_model, seq_len, eval_batch_size, eval_every,
      best_metric, layer_decay, head_dropout, lower, do_train, checkpoint, feature_cache_dir
      loop          FinetuneLoopConfig       pretraining's LoopConfig, fine-tuning defaults
      optimizer     FinetuneOptimizerConfig  pretraining's OptimizerConfig, fine-tuning defaults
      model         DropoutConfig            the backbone's dropout
      distribution  DistributionConfig
    ClassificationConfig(FinetuneConfig)   + task, data files or TFDS, columns, labels, pooling
    SquadConfig(FinetuneConfig)            + data files, windows, answer search, prediction
    RaceConfig(FinetuneConfig)             + data paths, question+option length

Fine-tuning never inherits pretraining's run-time settings: the backbone is built from the
architecture in `--model_config` (default: the init checkpoint's xlnet_config.json) with no
memory, no bi_data and this run's dropout.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Tuple

from xlnet_tf2 import config_flags
from xlnet_tf2.config_flags import (RunConfigError, check_declared, check_positive, section,
                                    setting, with_defaults)
from xlnet_tf2.training.run_config import (DistributionConfig, DropoutConfig, LoopConfig,
                                           OptimizerConfig)

# The paper's fine-tuning recipe (Table 8), for every task: dropout and attention dropout 0.1
# (DropoutConfig's defaults), weight decay 0.01, Adam epsilon 1e-6, linear decay; with weight
# decay > 0 the optimizer has no bias correction (the original's rule, optimization.py). Each
# task's row (sequence length, batch, learning rate, steps, layer-wise decay) is its config's
# defaults below; warmup 1000 steps is the original's fine-tuning scripts' (Table 8 gives none).
# docs/FINETUNING.md lists each command's defaults beside the paper's row.
PAPER_WEIGHT_DECAY = 0.01
PAPER_WARMUP_STEPS = 1000


def _loop_defaults(name: str, train_steps: int, train_batch_size: int):
    return with_defaults(LoopConfig, name, train_steps=train_steps,
                         train_batch_size=train_batch_size, steps_per_loop=1, save_steps=500,
                         keep_checkpoints=1, log_steps=50)


def _optimizer_defaults(name: str, learning_rate: float, warmup_steps: int = PAPER_WARMUP_STEPS):
    return with_defaults(OptimizerConfig, name, learning_rate=learning_rate,
                         warmup_steps=warmup_steps, weight_decay=PAPER_WEIGHT_DECAY)


# The generic fine-tuning run (the library's FinetuneTask): the paper's optimizer settings.
FinetuneLoopConfig = _loop_defaults("FinetuneLoopConfig", 1000, 32)
FinetuneOptimizerConfig = _optimizer_defaults("FinetuneOptimizerConfig", 2e-5, warmup_steps=0)
# Table 8's rows: MNLI for classification (seq 128, batch 128, lr 2e-5, 10k steps), SQuAD
# (512, 48, 3e-5, 8k, layer decay 0.75), RACE (512, 32, 2e-5, 12k).
ClassificationLoopConfig = _loop_defaults("ClassificationLoopConfig", 10_000, 128)
ClassificationOptimizerConfig = _optimizer_defaults("ClassificationOptimizerConfig", 2e-5)
SquadLoopConfig = _loop_defaults("SquadLoopConfig", 8_000, 48)
SquadOptimizerConfig = _optimizer_defaults("SquadOptimizerConfig", 3e-5)
RaceLoopConfig = _loop_defaults("RaceLoopConfig", 12_000, 32)
RaceOptimizerConfig = _optimizer_defaults("RaceOptimizerConfig", 2e-5)

LOWER_IS_BETTER = ("mse", "loss")


def check_room(config, name: str, holds: str, rest: str) -> None:
    """`--name` (positive) tokens of `holds`, two <sep>, <cls> and at least one token of
    `rest` fit in `config.seq_len`; else RunConfigError naming both flags."""
    check_positive(config, name)
    value, seq_len = getattr(config, name), config.seq_len
    if value + 4 > seq_len:
        raise RunConfigError(
            f"--{name}={value} leaves no room for the {rest} in --seq_len={seq_len} ({holds}, "
            f"two <sep>, <cls> and at least one {rest} token); use {name} <= {seq_len - 4} or "
            "a longer seq_len.")


def check_squad_windows(config) -> None:
    """SQuAD's window settings (a SquadConfig, a squad task.json's HeadSpec): positive, and a
    question of max_query_length tokens leaves room for the document."""
    check_positive(config, "doc_stride", "max_answer_length", "n_best_size")
    check_room(config, "max_query_length", "a question", "document")


@dataclasses.dataclass(frozen=True)
class FinetuneConfig:
    """Settings of one fine-tuning run (classification, regression, SQuAD, RACE)."""

    init_checkpoint: Optional[str] = setting(
        None, "Backbone weights to start from: whatever from_pretrained takes (a pretraining "
        "--model_dir, a converted release, a fine-tuning --model_dir's backbone at its best "
        "checkpoint, a HuggingFace directory or hub id, a release name such as "
        "xlnet-base-cased, an original release directory) or a checkpoint prefix "
        "(DIR/ckpt-1000). Its architecture and spiece.model are the defaults of --model_config "
        "and --spm_model. Unset: random initialization (then --model_config and --spm_model "
        "are required). Once the run has checkpoints they are what it resumes from, so this "
        "may then change (the run may be moved with it).", resume="warn")
    model_config: Optional[str] = setting(
        None, "The backbone architecture: a preset name (base, large, tiny) or the path of an "
        "xlnet_config.json (original or ours; only its architecture keys are used). Default: "
        "--init_checkpoint's.")
    spm_model: Optional[str] = setting(
        None, "The SentencePiece model (spiece.model) the backbone was pretrained with; it is "
        "copied into --model_dir. Default: the spiece.model of --init_checkpoint's model.",
        resume="free")
    seq_len: int = setting(
        128, "Tokens per example, special tokens included; longer inputs are truncated from "
        "the end of the longer text.")
    eval_batch_size: int = setting(
        32, "Evaluation batch size (every batch is padded to this size so shapes stay "
        "static).", resume="free")
    eval_every: int = setting(
        500, "Evaluate (and keep the best checkpoint) every this many steps, and at the end.",
        resume="free")
    best_metric: Optional[str] = setting(
        None, "The evaluation metric that picks the best checkpoint (default: the task's, "
        "accuracy for classification and RACE, pearson for regression, f1 for SQuAD); lower is "
        "better for mse and loss.", resume="warn")
    layer_decay: float = setting(
        1.0, "Layer-wise learning-rate decay: block i of n learns at lr * decay**(n-1-i), the "
        "embeddings at lr * decay**n, the head at lr (e.g. 0.75 for SQuAD with XLNet-large).",
        resume="warn")
    head_dropout: float = setting(
        0.1, "Dropout rate in the task head.", resume="warn")
    lower: bool = setting(False, "Lowercase text (only for uncased models).")
    do_train: bool = setting(
        True, "Train (the default). With --nodo_train, only evaluate the trained model in "
        "--model_dir on the evaluation data (the command's evaluation file, or its TFDS "
        "evaluation split), laid out as its task.json says, with its spiece.model, and print "
        "the metrics; nothing is trained or written into --model_dir (SQuAD writes its "
        "prediction files into --output_dir).", resume="free")
    checkpoint: str = setting(
        "best", "With --nodo_train: evaluate the best-evaluation weights (best/) or the latest "
        "training checkpoint.", choices=("best", "latest"), resume="free")
    feature_cache_dir: Optional[str] = setting(
        None, "Where tokenized features are cached as TFRecords, so the same data is tokenized "
        "once across runs and workers (default: $XLNET_TF2_CACHE or "
        "~/.cache/xlnet_tf2/features); 'off' disables the cache.", resume="free")
    loop: LoopConfig = section(FinetuneLoopConfig)
    optimizer: OptimizerConfig = section(FinetuneOptimizerConfig)
    model: DropoutConfig = section(DropoutConfig)
    distribution: DistributionConfig = section(DistributionConfig)

    def __post_init__(self):
        check_declared(self)  # the subclass's fields too: --kind, --summary_type, ...
        for name in ("seq_len", "eval_batch_size", "eval_every"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise RunConfigError(f"--{name} must be a positive integer, got {value!r}.")
        if self.seq_len < 3:
            raise RunConfigError(f"--seq_len={self.seq_len} leaves no room for a token beside "
                                 "<sep> and <cls>; it must be at least 3.")
        if not 0.0 < self.layer_decay <= 1.0:
            raise RunConfigError(f"--layer_decay must be in (0, 1], got {self.layer_decay}.")
        if not 0.0 <= self.head_dropout < 1.0:
            raise RunConfigError(f"--head_dropout must be in [0, 1), got {self.head_dropout}.")

    @classmethod
    def flat(cls, **values) -> "FinetuneConfig":
        """Built from flat setting names (as the flags): FinetuneConfig.flat(model_dir=...)."""
        return config_flags.from_flat(cls, values)

    def with_default_metric(self, metric: str) -> "FinetuneConfig":
        return self if self.best_metric else dataclasses.replace(self, best_metric=metric)

    @property
    def default_metric(self) -> Optional[str]:
        """The metric that picks the best checkpoint unless --best_metric says otherwise."""
        return None

    # Short names for the settings the task runners read.
    @property
    def model_dir(self) -> str:
        return self.loop.model_dir

    @property
    def train_batch_size(self) -> int:
        return self.loop.train_batch_size

    @property
    def seed(self) -> int:
        return self.loop.seed

    @property
    def best_mode(self) -> str:
        return "min" if (self.best_metric or "") in LOWER_IS_BETTER else "max"



SUMMARY_TYPES = ("last", "first", "mean", "attn")


@dataclasses.dataclass(frozen=True)
class ClassificationConfig(FinetuneConfig):
    """Sentence(-pair) classification or regression (experiments/run_classifier.py)."""

    kind: str = setting(
        "classification", "The kind of model to train: classification (softmax over the "
        "label set) or regression (one score, MSE). (Formerly --task.)",
        choices=("classification", "regression"), old_names=("task",))
    train_file: Optional[str] = setting(
        None, "Training data: a .tsv/.csv with a header row or a .jsonl file; columns are "
        "chosen with the *_column flags.", resume="warn")
    eval_file: Optional[str] = setting(
        None, "Evaluation data in the same format as --train_file.", resume="free")
    tfds_name: Optional[str] = setting(
        None, "A TensorFlow Datasets name (e.g. glue/sst2, glue/mnli, glue/stsb, "
        "imdb_reviews) used instead of --train_file/--eval_file; the data must be prepared in "
        "--tfds_data_dir (or downloadable).", resume="warn")
    tfds_train_split: str = setting("train", "The TFDS split to train on.", resume="warn")
    tfds_eval_split: Optional[str] = setting(
        None, "The TFDS split to evaluate on (default: the dataset's validation split, e.g. "
        "validation_matched for glue/mnli).", resume="free")
    tfds_data_dir: Optional[str] = setting(
        None, "The TensorFlow Datasets data directory (default: TFDS's own, "
        "~/tensorflow_datasets).", resume="free")
    text_a_column: Optional[str] = setting(
        None, "Name of the column holding the (first) text.")
    text_b_column: Optional[str] = setting(
        None, "Name of the column holding the second text of a pair task; leave unset for "
        "single-text tasks.")
    label_column: Optional[str] = setting(None, "Name of the column holding the label.")
    labels: Tuple[str, ...] = setting(
        (), "The label set in output order (e.g. 0,1). Default: the TFDS class names, or the "
        "sorted distinct labels of the training file. A label outside this set is an error "
        "naming the file and record.")
    summary_type: str = setting(
        "last", "How the sequence is pooled: last (the original <cls>-last, left-padded "
        "layout), first (<cls> first, right-padded), mean (over real tokens only) or attn (a "
        "learned query attending over real tokens).", choices=SUMMARY_TYPES)
    loop: LoopConfig = section(ClassificationLoopConfig)
    optimizer: OptimizerConfig = section(ClassificationOptimizerConfig)

    @property
    def default_metric(self) -> str:
        return "pearson" if self.kind == "regression" else "accuracy"


@dataclasses.dataclass(frozen=True)
class SquadConfig(FinetuneConfig):
    """SQuAD 1.1/2.0 span extraction with a no-answer class (experiments/run_squad.py)."""

    train_file: Optional[str] = setting(
        None, "Training data: a SQuAD-format JSON file (train-v1.1.json or train-v2.0.json). "
        "Required when training.", resume="warn")
    predict_file: Optional[str] = setting(
        None, "Evaluation data: a SQuAD-format JSON file (dev-v1.1.json or dev-v2.0.json); "
        "predicted and scored with the official metrics at every evaluation.", resume="free")
    version_2_with_negative: bool = setting(
        False, "SQuAD 2.0: questions may be unanswerable (is_impossible); predictions.json "
        "holds \"\" for questions whose no-answer score exceeds --null_score_threshold, and "
        "null_odds.json is written.")
    doc_stride: int = setting(
        128, "Tokens between the starts of consecutive document windows when a context does "
        "not fit in one sequence.")
    max_query_length: int = setting(
        64, "The question keeps at most this many (first) tokens.")
    max_answer_length: int = setting(
        64, "Longest answer considered at prediction time, in tokens.", resume="free")
    n_best_size: int = setting(
        5, "Beam width: the top n start positions times, for each, the top n end positions; "
        "also the number of candidates kept per question in nbest_predictions.json.")
    null_score_threshold: float = setting(
        0.0, "SQuAD 2.0: a question is predicted unanswerable when its answer-class logit "
        "(null_odds) exceeds this value.", resume="free")
    output_dir: Optional[str] = setting(
        None, "Where predictions.json, null_odds.json and nbest_predictions.json go "
        "(default: --model_dir).", resume="free")
    seq_len: int = setting(
        512, "Tokens per window, special tokens included (the paper's 512); a longer context is "
        "read in windows --doc_stride tokens apart.")
    layer_decay: float = setting(
        0.75, "Layer-wise learning-rate decay: block i of n learns at lr * decay**(n-1-i), the "
        "embeddings at lr * decay**n, the head at lr (the paper's 0.75 for SQuAD).",
        resume="warn")
    loop: LoopConfig = section(SquadLoopConfig)
    optimizer: OptimizerConfig = section(SquadOptimizerConfig)

    def __post_init__(self):
        super().__post_init__()
        check_squad_windows(self)

    @property
    def default_metric(self) -> str:
        return "f1"


@dataclasses.dataclass(frozen=True)
class RaceConfig(FinetuneConfig):
    """RACE-format multiple choice, 4 options (experiments/run_race.py)."""

    train_path: Optional[str] = setting(
        None, "A RACE JSON file or a directory of them (searched recursively, e.g. RACE/train "
        "covering high/ and middle/). Required when training.", resume="warn")
    eval_path: Optional[str] = setting(
        None, "Evaluation RACE file or directory.", resume="free")
    max_qa_length: int = setting(
        128, "Tokens kept of question+option (its last ones).")
    seq_len: int = setting(
        512, "Tokens per option's sequence (article, question and option, special tokens "
        "included; the paper's 512).")
    loop: LoopConfig = section(RaceLoopConfig)
    optimizer: OptimizerConfig = section(RaceOptimizerConfig)

    def __post_init__(self):
        super().__post_init__()
        check_room(self, "max_qa_length", "question and option", "article")

    @property
    def default_metric(self) -> str:
        return "accuracy"
