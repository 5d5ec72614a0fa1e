"""layers/step_plan.py: how a step is traced is a value handed down the calls, not a global."""

import dataclasses
import importlib.util
import re

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf2 import XLNetConfig, XLNetLMHeadModel
from xlnet_tf2.layers.dropout import assign_dropout_salts
from xlnet_tf2.layers.step_plan import DropoutKeys, StepPlan, keyed_plan


def test_this_machine_traces_for_a_cpu():
    plan = StepPlan.for_this_machine()
    assert plan.device == "cpu" and plan.attention == "auto" and plan.dropout_keys is None
    assert plan.stores_dropout_masks and plan.coordinate_gather
    assert not (plan.grouped_optimizer or plan.one_attention_for_both_streams)


@pytest.mark.parametrize("device", ["gpu", "tpu"])
def test_an_accelerators_plan_turns_every_cpu_form_off(device):
    plan = StepPlan(device=device)
    assert not plan.stores_dropout_masks and not plan.coordinate_gather
    assert plan.grouped_optimizer
    assert plan.content_window_read == (device == "gpu")
    # A TPU stacks the streams only for the Pallas kernels (auto, with JAX installed).
    assert plan.on(device).one_attention_for_both_streams == (
        device == "gpu" or importlib.util.find_spec("jax") is not None)
    assert StepPlan(device=device, attention="reference").one_attention_for_both_streams == (
        device == "gpu")
    assert plan.packs_dropout_masks == (device == "gpu")
    assert plan.on("cpu").stores_dropout_masks and plan.device == device  # frozen: a copy


def test_bad_settings_are_refused_by_name():
    with pytest.raises(ValueError, match="Unknown device 'npu'"):
        StepPlan(device="npu")
    with pytest.raises(ValueError, match="Unknown attention implementation 'flash'"):
        StepPlan(attention="flash")


@pytest.mark.xla
def test_two_plans_traced_in_one_process_give_two_programs():
    """The same training step traced with a CPU's plan, a GPU's, then a CPU's again: the GPU's
    program differs (one attention of L + P rows, bit-packed masks), and the second CPU trace is
    the first one's program exactly: nothing of the GPU's trace stayed behind."""
    config = XLNetConfig.preset("tiny", n_token=40, n_layer=1, mem_len=0, dropout=0.1,
                                dropatt=0.1)
    model = XLNetLMHeadModel(config)
    model.build()
    assign_dropout_salts(model)
    batch, length, predict = 2, 6, 2
    mapping = np.zeros((batch, predict, length), np.float32)
    mapping[:, 0, 1] = mapping[:, 1, 4] = 1.0
    features = {"input_ids": np.arange(12, 24, dtype=np.int32).reshape(batch, length),
                "perm_mask": np.triu(np.ones((batch, length, length), np.float32)),
                "target_mapping": mapping}

    def program(device):
        @tf.function(jit_compile=True)
        def step(features, global_step):
            plan = keyed_plan(seed=1, step=global_step, example_ids=tf.range(batch),
                              examples_per_step=batch,
                              plan=StepPlan(device=device, attention="reference"))
            with tf.GradientTape() as tape:
                logits = model(features, training=True, plan=plan)["logits"]
                loss = tf.reduce_mean(logits ** 2)
            return tape.gradient(loss, model.trainable_variables)
        text = step.experimental_get_compiler_ir(features, tf.constant(3, tf.int64))(
            stage="hlo")
        # Each instruction as its result's type and shape and its opcode, sorted: the names
        # are numbered per trace.
        return sorted(re.findall(r"= (\S+\[[\d,]*\])\S* (\w+)\(", text))

    cpu, gpu, cpu_again = program("cpu"), program("gpu"), program("cpu")
    assert cpu == cpu_again
    assert gpu != cpu
    opcodes = lambda program: {opcode for _, opcode in program}
    assert "conditional" in opcodes(cpu) and "conditional" not in opcodes(gpu)  # stored masks
    stacked = f"f32[{batch},{config.n_head},{length + predict},{length}]"
    shapes = lambda program: {shape for shape, _ in program}
    assert stacked in shapes(gpu) and stacked not in shapes(cpu)  # both streams as one


def _mutable_parts(value, path="plan"):
    """[(path, type)] of what `value` holds that can change: anything but None, str, int,
    float, bool, tensors and frozen dataclasses of those."""
    if value is None or isinstance(value, (str, int, float, bool, tf.Tensor)):
        return []
    if dataclasses.is_dataclass(value) and type(value).__dataclass_params__.frozen:
        return [part for field in dataclasses.fields(value)
                for part in _mutable_parts(getattr(value, field.name), f"{path}.{field.name}")]
    return [(path, type(value).__name__)]


def test_the_plan_holds_nothing_mutable_and_a_trace_leaves_it_as_it_was():
    """A traced training step counts each Dropout's draws (layers/dropout.py): the count lives
    in the layer, never in the frozen plan, whose keys are values made once per trace."""
    config = XLNetConfig.preset("tiny", n_token=40, n_layer=1, mem_len=0, dropout=0.1,
                                dropatt=0.1)
    model = XLNetLMHeadModel(config)
    model.build()
    assign_dropout_salts(model)
    seen = []

    @tf.function
    def step(ids, global_step):
        plan = keyed_plan(seed=1, step=global_step, example_ids=tf.range(2),
                          examples_per_step=2, plan=StepPlan(device="cpu"))
        before = dict(vars(plan.dropout_keys))
        model({"input_ids": ids}, training=True, plan=plan)
        seen.append((plan, before, dict(vars(plan.dropout_keys))))
        return ids

    step(tf.constant([[3, 4, 5], [6, 7, 8]]), tf.constant(2, tf.int64))
    plan, before, after = seen[0]
    assert isinstance(plan.dropout_keys, DropoutKeys)
    assert _mutable_parts(plan) == []
    assert after.keys() == before.keys() and all(after[k] is before[k] for k in before)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.dropout_keys.seed = 2
    assert _mutable_parts(StepPlan(device="gpu")) == []


@pytest.mark.parametrize("device", ["cpu", "gpu", "tpu"])
def test_only_the_reference_path_skips_the_attention_choice(device):
    """`kernel_attention` is false exactly where the step can take nothing but the reference
    attention (a CPU's step under auto, or reference forced): there the layer does not enter
    layers/kernels/attention_choice.py; anything forced goes there, to run or be refused."""
    assert StepPlan(device=device).kernel_attention == (device != "cpu")
    assert not StepPlan(device=device, attention="reference").kernel_attention
    for forced in ("cudnn", "triton", "pallas"):
        assert StepPlan(device=device, attention=forced).kernel_attention
