"""The compiled training step holds no constant that grows with the model's shape.

TensorFlow folds every op whose inputs are all constants into a literal of the op's output
size before XLA sees the step: the dropout hash's element index (one u32 array per dropout
call, [B, L, d_inner] and larger) and the relative position table (float [X, T, D]) had become
about 183 MB of constants at XLNet-Base, read from memory at every step and slow to compile.
These tests build a small pretraining Trainer's real step (forward, backward, AdamW, with
dropout 0.1 on every site) at two shapes, read the constants of the HLO that TensorFlow hands to
XLA, and fail if a large one comes back.
"""

import pytest

from benchmarks.tools.program_constants import constant_sizes
from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.tasks.pretraining import DataShape, PretrainTask
from xlnet_tf2.tasks.pretraining_config import PretrainConfig
from fixtures.synthetic_data import SyntheticPretrainData, synthetic_pretrain_dataset
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


@pytest.mark.slow  # two Trainer steps traced to HLO: 20-35 s
def test_the_training_steps_constants_stay_small_as_the_shape_grows(tmp_path):
    small = step_constants(tmp_path, seq_len=16, width=32)
    large = step_constants(tmp_path, seq_len=32, width=64)
    # Before: the position table f32[2,80,64] (40 KiB) and a u32[1,32,128] index (16 KiB)
    # per feed-forward dropout at the larger shape, and the attention masks' bool [L, K]
    # patterns (1.5 KiB here; layers/attention_masks.py, data/masks.py). What remains are 1-D
    # ranges: one per dimension of each dropout site, the positions, the frequencies.
    assert large[0][0] <= 1024, large[:8]
    total_small, total_large = sum(b for b, _ in small), sum(b for b, _ in large)
    # Every size doubled: constants proportional to one dimension double, the folded
    # [seq x width] ones (before: 8.6x) grow more.
    assert total_large < 2 * total_small, (total_small, total_large, large[:8])
