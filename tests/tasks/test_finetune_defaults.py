"""Every fine-tuning command defaults to the paper's Table 8 row for its task, and its
optimizer follows the original's bias-correction rule (weight decay 0.01 -> none)."""

import pytest

from xlnet_tf2.tasks.finetune_config import ClassificationConfig, RaceConfig, SquadConfig
from xlnet_tf2.training.optimization import resolve_bias_correction

# XLNet paper, appendix A.4.2, Table 8 (MNLI's row for the classification command).
TABLE_8 = {
    # config class: (seq_len, batch, learning rate, steps, layer-wise decay)
    ClassificationConfig: (128, 128, 2e-5, 10_000, 1.0),
    SquadConfig: (512, 48, 3e-5, 8_000, 0.75),
    RaceConfig: (512, 32, 2e-5, 12_000, 1.0),
}


@pytest.mark.parametrize("cls", list(TABLE_8), ids=lambda c: c.__name__)
def test_command_defaults_are_the_papers_row(cls):
    config = cls.flat(model_dir="unused", **({"train_path": "x"} if cls is RaceConfig else {}))
    seq_len, batch, lr, steps, layer_decay = TABLE_8[cls]
    assert (config.seq_len, config.loop.train_batch_size, config.optimizer.learning_rate,
            config.loop.train_steps, config.layer_decay) == (seq_len, batch, lr, steps,
                                                             layer_decay)
    # Shared by every row: dropout and attention dropout 0.1, weight decay 0.01, eps 1e-6.
    assert (config.model.dropout, config.model.dropatt) == (0.1, 0.1)
    assert (config.optimizer.weight_decay, config.optimizer.adam_epsilon) == (0.01, 1e-6)
    # ... so, by get_train_op's rule, Adam without bias correction unless asked for.
    assert config.optimizer.adam_bias_correction is None
    assert resolve_bias_correction(None, config.optimizer.weight_decay) is False
