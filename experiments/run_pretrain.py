"""Pretrains XLNet on data prepared by data_prep/create_tfrecords.py.

    python experiments/run_pretrain.py --data_dir=data/pretrain --model_dir=runs/base \
        --model_config=base --train_batch_size=256 --train_steps=100000

A run whose --model_dir already holds checkpoints resumes from the newest readable one
(weights, optimizer, step, Transformer-XL memory and data position). All logic lives in
xlnet_tf2 (tasks/pretraining.py, training/trainer.py); this file only parses flags.
"""

import sys

from absl import app, flags

from xlnet_tf2 import cli

cli.quiet_startup()  # no TensorFlow start-up noise unless --verbosity (before TF is imported)

from xlnet_tf2.config_flags import config_from_flags, define_flags  # noqa: E402
from xlnet_tf2.tasks.pretraining_config import PretrainConfig  # noqa: E402

FLAGS = flags.FLAGS
# Every flag is a setting of PretrainConfig (xlnet_tf2/tasks/pretraining_config.py), with its
# help.
define_flags(PretrainConfig)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    from xlnet_tf2.training import distribution
    from xlnet_tf2.tasks.pretraining import run_pretraining
    from xlnet_tf2.training.trainer import DataExhaustedError, TrainingDivergedError
    from xlnet_tf2.config_flags import RunConfigError
    from xlnet_tf2.config import ConfigError
    from xlnet_tf2.data.manifest import ManifestError
    from xlnet_tf2.data.pretrain_dataset import BatchLayoutError

    try:
        config = config_from_flags(PretrainConfig)
        if config.loop.deterministic:  # before anything starts TensorFlow's runtime
            from xlnet_tf2.training import determinism
            determinism.enable()
        # Next: multi-worker and TPU strategies need a fresh TensorFlow runtime.
        dist = config.distribution
        strategy = distribution.resolve_strategy(dist.strategy, dist.tpu, dist.tpu_timeout)
        result = run_pretraining(config, strategy)
    except (distribution.StrategyError, RunConfigError, ConfigError, ManifestError,
            BatchLayoutError, FileNotFoundError) as e:
        print(f"run_pretrain.py: error: {e}", file=sys.stderr)
        return 2
    except (TrainingDivergedError, DataExhaustedError) as e:
        print(f"run_pretrain.py: stopped: {e}", file=sys.stderr)
        return 3
    last = result.steps[-1]["loss"] if result.steps else float("nan")
    print(f"Finished at step {result.final_step} (started at {result.start_step}); "
          f"last loss {last:.4f}; model_dir {config.model_dir}", flush=True)
    return 0


if __name__ == "__main__":
    app.run(main)
