"""layers/run_time.py: the one switch between a CPU's and an accelerator's program."""

import pytest

from xlnet_tf2.layers import dropout, relative_position, run_time


def test_this_machine_traces_for_a_cpu():
    assert run_time.kind() == "cpu"
    assert dropout.masks_are_stored_here() and relative_position.coordinate_gather_here()


@pytest.mark.parametrize("target", ["gpu", "tpu"])
def test_forcing_an_accelerator_turns_every_cpu_switch_off(target):
    with run_time.tracing_for(target):
        assert run_time.kind() == target
        assert not dropout.masks_are_stored_here()
        assert not relative_position.coordinate_gather_here()
        with run_time.tracing_for("cpu"):  # nests, and restores the outer target
            assert dropout.masks_are_stored_here()
        assert run_time.kind() == target
    assert run_time.kind() == "cpu"


def test_an_unknown_target_is_refused_by_name():
    with pytest.raises(ValueError, match="Unknown trace target 'npu'"):
        with run_time.tracing_for("npu"):
            pass
