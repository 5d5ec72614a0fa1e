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
    cli.no_arguments(argv)
    config = config_from_flags(PretrainConfig)
    if config.loop.deterministic:  # before anything starts TensorFlow's runtime
        from xlnet_tf2.training import determinism
        determinism.enable()
    from xlnet_tf2.tasks.pretraining import run_pretraining
    from xlnet_tf2.training.distribution import strategy_of

    # Before anything else: multi-worker and TPU strategies need a fresh runtime. A diverged
    # loss or exhausted data stops the run with status 3 (cli.STOPPED_ERRORS).
    result = run_pretraining(config, strategy_of(config.distribution))
    last = result.steps[-1]["loss"] if result.steps else float("nan")
    print(f"Finished at step {result.final_step} (started at {result.start_step}); "
          f"last loss {last:.4f}; model_dir {config.model_dir}", flush=True)
    return 0


def main() -> None:
    """`xlnet-pretrain` and experiments/run_pretrain.py."""
    cli.run(run, usage=__doc__)
