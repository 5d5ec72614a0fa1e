"""The loop's --jit_compile default: XLA for runs of JIT_MIN_STEPS steps or more (where it is
the faster choice), not for shorter ones (where its one-off compile costs more than it saves);
an explicit flag always wins, and a checkpointed run may change it on resume."""

import pytest

from xlnet_tf2 import config_flags
from xlnet_tf2.tasks.finetune_config import ClassificationConfig, RaceConfig, SquadConfig
from xlnet_tf2.tasks.pretraining_config import PretrainConfig
from xlnet_tf2.training.run_config import JIT_MIN_STEPS, LoopConfig


@pytest.mark.xla
@pytest.mark.parametrize("steps, compiled", [(1, False), (JIT_MIN_STEPS - 1, False),
                                             (JIT_MIN_STEPS, True), (500_000, True)])
def test_unset_jit_compile_follows_the_run_length(steps, compiled):
    assert LoopConfig(model_dir="m", train_steps=steps).jit_compile is compiled


@pytest.mark.parametrize("steps", [1, 10_000])
@pytest.mark.parametrize("explicit", [True, False])
def test_an_explicit_jit_compile_wins(steps, explicit):
    assert LoopConfig(model_dir="m", train_steps=steps, jit_compile=explicit).jit_compile is \
        explicit


@pytest.mark.xla
@pytest.mark.parametrize("cls", [PretrainConfig, ClassificationConfig, SquadConfig, RaceConfig],
                         ids=lambda c: c.__name__)
def test_every_command_compiles_at_its_default_length_and_not_a_short_run(cls):
    extra = {"train_path": "x"} if cls is RaceConfig else {}
    if cls is PretrainConfig:
        extra = {"data_dir": ("d",)}
    assert cls.flat(model_dir="m", **extra).loop.jit_compile is True
    assert cls.flat(model_dir="m", train_steps=20, **extra).loop.jit_compile is False
    assert cls.flat(model_dir="m", train_steps=20, jit_compile=True,
                    **extra).loop.jit_compile is True


@pytest.mark.xla
def test_the_resolved_value_is_recorded_and_free_to_change_on_resume():
    short = config_flags.to_flat(LoopConfig(model_dir="m", train_steps=20))
    assert short["jit_compile"] is False
    longer = LoopConfig(model_dir="m", train_steps=JIT_MIN_STEPS)
    changes = config_flags.changed_settings(LoopConfig, short, longer)
    assert [(c.name, c.old, c.new, c.resume) for c in changes
            if c.name == "jit_compile"] == [("jit_compile", False, True, "free")]
