"""layers/trace_target.py: the one switch between a CPU's and an accelerator's program."""

import pytest

from xlnet_tf2.layers import dropout, relative_position, trace_target


def test_this_machine_traces_for_a_cpu():
    assert trace_target.kind() == "cpu" and trace_target.is_cpu()
    assert dropout.masks_are_stored_here() and relative_position.coordinate_gather_here()


@pytest.mark.parametrize("target", ["gpu", "tpu"])
def test_forcing_an_accelerator_turns_every_cpu_switch_off(target):
    with trace_target.tracing_for(target):
        assert trace_target.kind() == target and not trace_target.is_cpu()
        assert not dropout.masks_are_stored_here()
        assert not relative_position.coordinate_gather_here()
        with trace_target.tracing_for("cpu"):  # nests, and restores the outer target
            assert dropout.masks_are_stored_here()
        assert trace_target.kind() == target
    assert trace_target.kind() == "cpu"


def test_an_unknown_target_is_refused_by_name():
    with pytest.raises(ValueError, match="Unknown trace target 'npu'"):
        with trace_target.tracing_for("npu"):
            pass
