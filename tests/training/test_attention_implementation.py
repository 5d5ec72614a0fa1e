"""--attention_implementation: the training step's attention as the Trainer traces it.

A tiny pretraining Trainer's whole compiled step (forward, backward, AdamW) traced for a GPU
holds cuDNN's flash-attention calls under "auto" when attention dropout is off, none when it
is on or the reference is forced; the CPU's own trace never holds them."""

import re

import pytest

from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.layers.kernels.cudnn import CUDNN_BACKWARD, CUDNN_FORWARD
from xlnet_tf2.tasks.pretraining import DataShape, PretrainTask
from xlnet_tf2.tasks.pretraining_config import PretrainConfig
from xlnet_tf2.training.trainer import Trainer
from benchmarks.tools.synthetic_data import SyntheticPretrainData, synthetic_pretrain_dataset

SEQ, LAYERS = 16, 2


def _step_calls(tmp_path, target, dropatt=0.0, implementation="auto"):
    """Custom-call targets of the Trainer's compiled step traced for `target`."""
    shape = DataShape(seq_len=SEQ, reuse_len=SEQ // 2, num_predict=4, bi_data=True)

    def dataset_fn(context, start_step):
        return synthetic_pretrain_dataset(
            seq_len=SEQ, reuse_len=SEQ // 2, num_predict=4, bi_data=True, vocab_size=200,
            global_batch_size=4, input_context=context, start_step=start_step)

    model = XLNetConfig.preset("tiny", n_token=200, n_layer=LAYERS, d_model=32, n_head=2,
                               d_head=16, d_inner=64)
    config = PretrainConfig.flat(
        model_dir=str(tmp_path / f"run-{target}-{dropatt}-{implementation}"),
        data_dir=("synthetic",), model_config="tiny", train_batch_size=4, train_steps=1,
        mem_len=SEQ // 2, jit_compile=True, precision="mixed_bfloat16", dropout=0.1,
        dropatt=dropatt, attention_implementation=implementation, peak_tflops=1.0)
    trainer = Trainer(PretrainTask(config, architecture=model,
                                   data=SyntheticPretrainData(shape, 200, dataset_fn)))
    step_fn, args = trainer.first_step(device=target)
    hlo = step_fn.experimental_get_compiler_ir(*args)(stage="hlo")
    return re.findall(r'custom_call_target="([^"]+)"', hlo)


@pytest.mark.slow  # five tiny Trainer steps traced to HLO, about 30 s
def test_the_step_for_a_gpu_holds_cudnn_attention_only_where_it_can_run(tmp_path):
    calls = _step_calls(tmp_path, "gpu")
    # On a GPU both streams of a layer are one attention of L + P rows
    # (layers/step_plan.py): one call forward and one backward per layer.
    assert calls.count(CUDNN_FORWARD) == LAYERS
    assert calls.count(CUDNN_BACKWARD) == LAYERS
    assert not any("cudnn" in c for c in _step_calls(tmp_path, "gpu", dropatt=0.1))
    assert not any("cudnn" in c for c in _step_calls(tmp_path, "gpu",
                                                       implementation="reference"))
    assert not any("cudnn" in c for c in _step_calls(tmp_path, "cpu"))
    assert not any("cudnn" in c for c in _step_calls(tmp_path, "tpu"))
