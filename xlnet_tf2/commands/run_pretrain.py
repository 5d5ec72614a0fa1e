"""Pretrains XLNet on data prepared by xlnet-create-tfrecords.

    xlnet-pretrain --data_dir=data/pretrain --model_dir=runs/base \\
        --model_config=base --train_batch_size=256 --train_steps=100000

(from a checkout: python experiments/run_pretrain.py, same flags.) A run whose --model_dir
already holds checkpoints resumes from the newest readable one (weights, optimizer, step,
Transformer-XL memory and data position). Every flag is a setting of PretrainConfig
(xlnet_tf2/tasks/pretraining_config.py); the task is xlnet_tf2/tasks/pretraining.py. Exit
status: 0 done, 2 bad input (one line naming the flag, file or checkpoint), 3 the run stopped
(the loss diverged or the data ran out), 75 preempted (a SIGTERM or termination notice:
stopped after a step with its checkpoint; run it again).
"""

from xlnet_tf2 import cli

cli.quiet_startup()  # no TensorFlow start-up noise unless --verbosity (before TF is imported)

from xlnet_tf2.config_flags import config_from_flags, define_flags  # noqa: E402
from xlnet_tf2.tasks.pretraining_config import PretrainConfig  # noqa: E402

define_flags(PretrainConfig)


def run(argv):
    del argv
    config = config_from_flags(PretrainConfig)
    from xlnet_tf2.tasks.pretraining import PretrainTask
    from xlnet_tf2.training.trainer import run_task

    # A diverged loss or exhausted data stops the run with status 3 (cli.STOPPED_ERRORS).
    print(run_task(PretrainTask, config).summary(), flush=True)
    return 0


def main() -> None:
    """`xlnet-pretrain` and experiments/run_pretrain.py."""
    cli.run(run, usage=__doc__)
