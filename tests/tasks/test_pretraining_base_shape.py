"""One compiled training step at XLNet-Base's pretraining shape on CPU: 12 layers, d_model 768,
12 heads, d_inner 3072, seq 512, reuse 256, mem 384, 85 predictions, batch 2, bi_data, under
jit_compile=True, with the masks built on the device from the compact features. It must trace,
compile and run within 24 GiB of host memory (benchmarks/benchmark_base_step.py times it
against HuggingFace)."""

import math
import resource

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.tasks.pretraining import DataShape, PretrainTask
from xlnet_tf2.tasks.pretraining_config import PretrainConfig
from benchmarks.tools.synthetic_data import SyntheticPretrainData, synthetic_pretrain_dataset
from xlnet_tf2.training.trainer import Trainer

L, R, M, P, B = 512, 256, 384, 85, 2


@pytest.mark.xla
@pytest.mark.slow
def test_base_shape_step_compiles_and_runs_on_cpu(tmp_path):
    shape = DataShape(seq_len=L, reuse_len=R, num_predict=P, bi_data=True)

    def dataset_fn(context, start_step):
        return synthetic_pretrain_dataset(seq_len=L, reuse_len=R, num_predict=P, bi_data=True,
                                          vocab_size=32000, global_batch_size=B,
                                          input_context=context, start_step=start_step)

    config = PretrainConfig.flat(
        model_dir=str(tmp_path), data_dir=("synthetic",), model_config="base",
        train_batch_size=B, train_steps=10, mem_len=M, jit_compile=True, learning_rate=1e-4,
        warmup_steps=0, dropout=0.1, dropatt=0.1, peak_tflops=1.0)
    p = Trainer(PretrainTask(config, architecture=XLNetConfig.preset("base"),
                             data=SyntheticPretrainData(shape, 32000, dataset_fn)))
    c = p.task.xlnet_config
    assert (c.n_layer, c.d_model, c.n_head, c.d_inner, c.n_token) == (12, 768, 12, 3072, 32000)
    assert (c.mem_len, c.reuse_len, c.bi_data) == (M, R, True)
    # The compiled loop itself (one step); train() would also write a 1.3 GB checkpoint.
    state = p.distribute_state()
    state, stats = p._loop(iter(p.strategy.distribute_datasets_from_function(
        lambda context: dataset_fn(context, 0))), state, tf.constant(1, tf.int32))
    loss = float(stats["loss"][0])
    # Fresh weights (init 0.02) predict about uniformly over the 32000 pieces.
    assert abs(loss - math.log(32000)) < 0.5, loss
    assert np.isfinite(float(stats["grad_norm"][0])) and float(stats["grad_norm"][0]) > 0
    assert int(p.global_step.numpy()) == 1
    assert len(state) == 12
    for m in state:
        assert tuple(m.shape) == (B, M, 768)
        assert float(tf.reduce_max(tf.abs(m))) > 0
    peak_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    assert peak_gib < 24, f"peak host memory {peak_gib:.1f} GiB"
