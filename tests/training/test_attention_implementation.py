"""--attention_implementation: the training step's attention as the Trainer traces it.

A tiny pretraining Trainer's whole compiled step (forward, backward, AdamW) traced for a GPU
holds the flash Triton kernels' calls under "auto" (triton importable), with attention dropout
or without; cuDNN's flash-attention calls when forced without attention dropout; neither when
the reference is forced; the CPU's and the TPU's traces never hold them. Traced for a TPU it
holds the Pallas kernels' calls under "auto" (JAX importable), one forward and one backward
per layer for both streams, and none with the reference forced. A forced implementation that
cannot run, and kernels that fail their check on the device, are one line."""

import re

import pytest
import tensorflow as tf

from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.config_flags import RunConfigError
from xlnet_tf2.layers.kernels import attention_choice
from xlnet_tf2.layers.kernels import triton_attention
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
@pytest.mark.slow  # tiny Trainer steps traced and compiled, about 60 s
def test_a_gpu_whose_xla_rejects_the_kernels_trains_on_the_reference_or_refuses_in_one_line(
        tmp_path, monkeypatch, caplog):
    """This CPU's XLA, which has no Triton custom call, stands in for a GPU's that rejects the
    kernels: their check on the device (kernels/triton_attention.py) fails before the step is
    compiled; "auto" trains on the reference attention after one line saying why, a forced
    "triton" is one line naming the flag (a typed error, no message read)."""
    pytest.importorskip("triton")
    monkeypatch.setattr(triton_attention, "_gpu_present", lambda: True)
    monkeypatch.setattr(triton_attention, "_CHECKED", {})
    monkeypatch.setattr(attention_choice, "_SAID", set())
    result = _trainer(tmp_path, "gpu", dropatt=0.1).train()
    assert len(result.steps) == 1
    said = [r.getMessage() for r in caplog.records if "Triton attention kernels" in
            r.getMessage()]
    assert len(said) == 1 and said[0].startswith(
        "--attention_implementation=auto: the Triton attention kernels failed their check: "
        "they did not compile or run on this device (NotFoundError: ")
    trainer = _trainer(tmp_path, "gpu", dropatt=0.1, implementation="triton")
    with pytest.raises(RunConfigError) as raised:
        trainer.train()
    assert re.fullmatch(r"--attention_implementation=triton cannot run here: the Triton "
                        r"attention kernels failed their check: they did not compile or run "
                        r"on this device \(NotFoundError: .*\); use "
                        r"--attention_implementation=auto \(or reference\)\.",
                        str(raised.value)), str(raised.value)


def test_the_trainer_finds_the_attentions_error_by_its_type():
    """AutoGraph re-raises an error of the traced code as its own StagingError: the trainer
    takes the AttentionImplementationError out of it by type; a ValueError with the same text
    is not one."""
    line = "--attention_implementation=triton cannot run here: why; use auto."

    def traced(error):
        @tf.function
        def step(x):
            if x.shape[0] == 1:
                raise error
            return x
        try:
            step(tf.zeros([1]))
        except Exception as e:  # noqa: BLE001
            return e

    raised = traced(attention_choice.AttentionImplementationError(line))
    assert not isinstance(raised, attention_choice.AttentionImplementationError)
    assert str(attention_choice.raised_while_tracing(raised)) == line
    assert attention_choice.raised_while_tracing(traced(ValueError(line))) is None


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
    """Before anything is written: what is known before the step is traced (the device, XLA)
    refuses it then."""
    pytest.importorskip("triton")
    trainer = _trainer(tmp_path, target, implementation="triton", jit_compile=jit_compile)
    with pytest.raises(RunConfigError) as raised:
        trainer.train()
    assert str(raised.value) == said
    assert not (tmp_path / f"run-{target}-0.0-triton").exists()


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
