"""`TokenClassificationConfig`, the settings of `xlnet-tag` (experiments/run_tagger.py).

Defaults: the paper's Table 8 has no token-level row. The learning rate (2e-5), sequence
length (128), weight decay (0.01) and no layer decay are its classification row's (MNLI): a
tagger reads one short sentence per example as MNLI reads a short pair. The batch (32) is its
RACE row's rather than MNLI's 128, and the steps (3000, about 7 epochs of CoNLL-2003's 14,041
training sentences), because a NER training set is some 30 times smaller than MNLI's; warmup
is the original scripts' 1000 steps scaled to that run (300). This module imports no
TensorFlow, so `--help` stays fast.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from xlnet_tf2.config_flags import section, setting
from xlnet_tf2.tasks.finetune_config import (FinetuneConfig, _loop_defaults,
                                             _optimizer_defaults)
from xlnet_tf2.training.run_config import LoopConfig, OptimizerConfig

TaggerLoopConfig = _loop_defaults("TaggerLoopConfig", 3_000, 32)
TaggerOptimizerConfig = _optimizer_defaults("TaggerOptimizerConfig", 2e-5, warmup_steps=300)


@dataclasses.dataclass(frozen=True)
class TokenClassificationConfig(FinetuneConfig):
    """Token classification (NER, tagging) on CoNLL-format files (experiments/run_tagger.py)."""

    train_file: Optional[str] = setting(
        None, "CoNLL-format training file: one word per line, its tag in the last column "
        "(BIO or IOB), a blank line between sentences; -DOCSTART- lines are skipped. "
        "Required when training.", resume="warn")
    eval_file: Optional[str] = setting(
        None, "CoNLL-format evaluation file. A tag the model does not know (absent from the "
        "training file) is scored as conlleval scores it: its entities count as missed, with "
        "one warning line naming the tags.", resume="free")
    seq_len: int = setting(
        128, "Tokens per sentence, special tokens included; words past it are left untagged "
        "(predicted \"O\") and counted as missed.")
    loop: LoopConfig = section(TaggerLoopConfig)
    optimizer: OptimizerConfig = section(TaggerOptimizerConfig)

    @property
    def default_metric(self) -> str:
        return "f1"
