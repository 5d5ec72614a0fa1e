"""--attention_implementation: the training step's attention as the Trainer traces it.

A tiny pretraining Trainer's whole compiled step (forward, backward, AdamW) traced for a GPU
holds the flash Triton kernels' calls under "auto" (triton importable), with attention dropout
or without; cuDNN's flash-attention calls when forced without attention dropout; neither when
the reference is forced; the CPU's and the TPU's traces never hold them. Traced for a TPU it
holds the Pallas kernels' calls under "auto" (JAX importable), one forward and one backward
per layer for both streams, and none with the reference forced."""

import re

import pytest

from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.config_flags import RunConfigError
from xlnet_tf2.layers.kernels.cudnn import CUDNN_BACKWARD, CUDNN_FORWARD
from xlnet_tf2.layers.kernels.pallas_call import TARGET as PALLAS_TARGET
from xlnet_tf2.layers.kernels.triton_call import TARGET as TRITON_TARGET
from xlnet_tf2.tasks.pretraining import DataShape, PretrainTask
from xlnet_tf2.tasks.pretraining_config import PretrainConfig
from xlnet_tf2.training.trainer import Trainer
from benchmarks.tools.synthetic_data import SyntheticPretrainData, synthetic_pretrain_dataset

SEQ, LAYERS = 16, 2


def _trainer(tmp_path, target, dropatt=0.0, implementation="auto", jit_compile=True):
    """A tiny pretraining Trainer whose step is traced for `target`."""
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
        mem_len=SEQ // 2, jit_compile=jit_compile, precision="mixed_bfloat16", dropout=0.1,
        dropatt=dropatt, attention_implementation=implementation, peak_tflops=1.0)
    return Trainer(PretrainTask(config, architecture=model,
                                data=SyntheticPretrainData(shape, 200, dataset_fn)),
                   device=target)


def _step_calls(tmp_path, target, dropatt=0.0, implementation="auto"):
    """Custom-call targets of the Trainer's compiled step traced for `target`."""
    trainer = _trainer(tmp_path, target, dropatt, implementation)
    step_fn, args = trainer.first_step(device=target)
    hlo = step_fn.experimental_get_compiler_ir(*args)(stage="hlo")
    return re.findall(r'custom_call_target="([^"]+)"', hlo)


@pytest.mark.xla
@pytest.mark.slow  # seven tiny Trainer steps traced to HLO, about 60 s
def test_the_step_for_a_gpu_holds_flash_attention_only_where_it_can_run(tmp_path):
    pytest.importorskip("triton")
    # On a GPU both streams of a layer are one attention of L + P rows
    # (layers/step_plan.py): per layer one forward and two backward Triton calls.
    for dropatt in (0.0, 0.1):
        calls = _step_calls(tmp_path, "gpu", dropatt=dropatt)
        assert calls.count(TRITON_TARGET) == 3 * LAYERS
        assert not any("cudnn" in c for c in calls)
    calls = _step_calls(tmp_path, "gpu", implementation="cudnn")
    assert calls.count(CUDNN_FORWARD) == LAYERS
    assert calls.count(CUDNN_BACKWARD) == LAYERS
    assert TRITON_TARGET not in calls
    assert not any("cudnn" in c for c in _step_calls(tmp_path, "gpu",
                                                       implementation="reference"))
    for target in ("cpu", "tpu"):
        assert not any("cudnn" in c or "triton" in c for c in _step_calls(tmp_path, target))


@pytest.mark.xla
@pytest.mark.slow  # one tiny Trainer step traced and compiled, about 40 s
def test_an_xla_that_rejects_the_triton_kernels_is_one_line_naming_the_flag(tmp_path):
    """The step traced for a GPU compiled by an XLA without the Triton custom call (this
    CPU's): the trainer's first loop says which flag falls back, in one line."""
    pytest.importorskip("triton")
    trainer = _trainer(tmp_path, "gpu", dropatt=0.1)
    with pytest.raises(RunConfigError, match=r"^This GPU's XLA rejected the Triton attention "
                       r"kernels when it compiled the step; run with "
                       r"--attention_implementation=reference \(XLA said: .*triton"):
        trainer.train()


@pytest.mark.parametrize("target,jit_compile,said", [
    ("cpu", True, "--attention_implementation=triton runs only in a step traced for a GPU, "
                  "and this machine's step is traced for a CPU; use "
                  "--attention_implementation=auto (or reference)."),
    ("gpu", False, "--attention_implementation=triton cannot run here: the step is not "
                   "compiled by XLA (--jit_compile); use --attention_implementation=auto (or "
                   "reference)."),
])
@pytest.mark.xla
def test_a_forced_implementation_that_cannot_run_is_one_line(tmp_path, target, jit_compile,
                                                            said):
    """Before anything is written on a machine that is no GPU; else when the first loop
    traces the step, the attention op's own line out of Keras' and AutoGraph's wrappers."""
    pytest.importorskip("triton")
    trainer = _trainer(tmp_path, target, implementation="triton", jit_compile=jit_compile)
    with pytest.raises(RunConfigError) as raised:
        trainer.train()
    assert str(raised.value) == said
    if target == "cpu":  # refused before the run directory was made
        assert not (tmp_path / "run-cpu-0.0-triton").exists()


@pytest.mark.xla
@pytest.mark.slow  # two tiny Trainer steps traced to HLO, the kernels lowered by JAX
def test_the_step_for_a_tpu_holds_the_pallas_kernels(tmp_path):
    pytest.importorskip("jax")
    calls = _step_calls(tmp_path, "tpu", dropatt=0.1)
    assert calls.count(PALLAS_TARGET) == 2 * LAYERS  # both streams: one forward, one backward
    assert PALLAS_TARGET not in _step_calls(tmp_path, "tpu", implementation="reference")


@pytest.mark.xla
def test_pallas_forced_on_a_cpu_is_one_line(tmp_path):
    trainer = _trainer(tmp_path, "cpu", implementation="pallas")
    with pytest.raises(RunConfigError) as raised:
        trainer.train()
    assert str(raised.value) == (
        "--attention_implementation=pallas runs only in a step traced for a TPU, and this "
        "machine's step is traced for a CPU; use --attention_implementation=auto (or "
        "reference).")
    assert not (tmp_path / "run-cpu-0.0-pallas").exists()
