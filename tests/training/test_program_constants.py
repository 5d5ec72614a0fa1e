"""The compiled training step holds no constant that grows with the model's shape.

TensorFlow folds every op whose inputs are all constants into a literal of the op's output
size before XLA sees the step: the dropout hash's element index (one u32 array per dropout
call, [B, L, d_inner] and larger) and the relative position table (float [X, T, D]) had become
about 183 MB of constants at XLNet-Base, read from memory at every step and slow to compile.
These tests build a small pretraining Trainer's real step (forward, backward, AdamW, with
dropout 0.1 on every site) at two shapes, read the constants of the HLO that TensorFlow hands to
XLA, and fail if a large one comes back.

The fine-tuning step once went further: its gradients came from a jit-compiled tf.function
called inside the compiled step, and TensorFlow folded that inner call's variable reads and the
step number into literals, so the "compiled" step was a new program at every step (15 s a step
instead of 0.18 s for a 4 x 128 classifier on 2 CPU cores).
"""

import numpy as np
import pytest

from benchmarks.tools.program_constants import constant_sizes
from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.tasks.pretraining import DataShape, PretrainTask
from xlnet_tf2.tasks.pretraining_config import PretrainConfig
from xlnet_tf2.data.finetune_batches import global_batches_fn
from xlnet_tf2.models.xlnet_classifier import SequenceClassifier
from xlnet_tf2.tasks.finetuning import FinetuneConfig, FinetuneTask
from xlnet_tf2.tasks.losses import classification_loss
from benchmarks.tools.synthetic_data import SyntheticPretrainData, synthetic_pretrain_dataset
from xlnet_tf2.training.trainer import Trainer


def test_constant_sizes_parses_hlo_text():
    text = ("%constant.1 = u32[1,32,128]{2,1,0} constant({...})\n"
            "%c = f32[] constant(0.5)\n"
            "  %constant.7 = pred[4,3]{1,0} constant({ {0, 1, 0}, ... })\n"
            "%add = u32[8]{0} add(u32[8]{0} %a, u32[8]{0} %b)\n")
    assert constant_sizes(text) == [(16384, "u32[1,32,128]"), (12, "pred[4,3]"), (4, "f32[]")]


def step_constants(tmp_path, seq_len: int, width: int):
    """The constants of the HLO of the Trainer's jit-compiled step for a 2-layer model of
    `width` on pretraining examples of `seq_len` (memory seq_len / 2, bi_data, dropout 0.1)."""
    shape = DataShape(seq_len=seq_len, reuse_len=seq_len // 2, num_predict=4, bi_data=True)

    def dataset_fn(context, start_step):
        return synthetic_pretrain_dataset(
            seq_len=seq_len, reuse_len=seq_len // 2, num_predict=4, bi_data=True,
            vocab_size=200, global_batch_size=4, input_context=context, start_step=start_step)

    model = XLNetConfig.preset("tiny", n_token=200, n_layer=2, d_model=width, n_head=2,
                               d_head=width // 2, d_inner=2 * width)
    config = PretrainConfig.flat(
        model_dir=str(tmp_path / f"run-{seq_len}-{width}"), data_dir=("synthetic",),
        model_config="tiny", train_batch_size=4, train_steps=1, mem_len=seq_len // 2,
        jit_compile=True, learning_rate=1e-3, warmup_steps=0, dropout=0.1, dropatt=0.1,
        peak_tflops=1.0)
    trainer = Trainer(PretrainTask(config, architecture=model,
                                   data=SyntheticPretrainData(shape, 200, dataset_fn)))
    assert trainer.whole_step_compiled
    features = next(iter(dataset_fn(None, 0)))
    keys = trainer.task.step_features
    features = features if keys is None else {k: features[k] for k in keys}
    trainer.optimizer.build(trainer._trainable)  # the slots, outside the traced step
    hlo = trainer._step_fn.experimental_get_compiler_ir(
        features, trainer.distribute_state(), trainer.global_step.read_value())(stage="hlo")
    return constant_sizes(hlo)


@pytest.mark.xla
@pytest.mark.slow  # two Trainer steps traced to HLO: 20-35 s
def test_the_training_steps_constants_stay_small_as_the_shape_grows(tmp_path):
    small = step_constants(tmp_path, seq_len=16, width=32)
    large = step_constants(tmp_path, seq_len=32, width=64)
    # Before: the position table f32[2,80,64] (40 KiB) and a u32[1,32,128] index (16 KiB)
    # per feed-forward dropout at the larger shape, and the attention masks' bool [L, K]
    # patterns (1.5 KiB here; layers/relative_position.py, tasks/objective.py). What remains
    # are 1-D ranges: one per dimension of each dropout site, the positions, the frequencies.
    assert large[0][0] <= 1024, large[:8]
    total_small, total_large = sum(b for b, _ in small), sum(b for b, _ in large)
    # Every size doubled: constants proportional to one dimension double, the folded
    # [seq x width] ones (before: 8.6x) grow more.
    assert total_large < 2 * total_small, (total_small, total_large, large[:8])


@pytest.mark.xla
def test_the_finetuning_step_is_one_program_that_reads_its_variables(tmp_path):
    n_token, width = 300, 32
    ids = np.random.RandomState(0).randint(9, n_token, [16, 16]).astype(np.int32)
    features = {"input_ids": ids, "segment_ids": np.zeros_like(ids),
                "attention_mask": np.ones_like(ids), "label": (ids[:, 0] > 150).astype(np.int32)}
    model = XLNetConfig.preset("tiny", n_layer=1, d_model=width, n_head=2, d_head=16,
                               d_inner=64, n_token=n_token, dropout=0.1, dropatt=0.1)
    cfg = FinetuneConfig.flat(model_dir=str(tmp_path), train_steps=4, train_batch_size=8,
                              learning_rate=1e-3, warmup_steps=1, eval_every=100,
                              best_metric="accuracy", jit_compile=True)
    task = FinetuneTask(cfg, model_fn=lambda: SequenceClassifier(model, 2, head_dropout=0.1),
                        loss_fn=classification_loss, eval_fn=None, seq_len=16,
                        dataset_fn=global_batches_fn(features, 8, seed=5))
    trainer = Trainer(task)
    assert trainer.whole_step_compiled
    step_fn, (batch, state, step) = trainer.first_step()
    programs = [step_fn.experimental_get_compiler_ir(batch, state, step + k)(stage="hlo")
                for k in (0, 1)]
    # The embedding (f32[300,32], 38 KiB) and every other weight are parameters, not literals.
    largest = constant_sizes(programs[0])[0]
    assert largest[0] < n_token * width * 4, largest
    # The step number is a run-time input: steps 0 and 1 are the same program.
    assert programs[0] == programs[1]
