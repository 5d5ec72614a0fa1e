"""Fine-tunes XLNet on RACE-format multiple choice (4 options, softmax over them).

  xlnet-race --train_path=RACE/train --eval_path=RACE/dev \\
      --init_checkpoint=converted/large \\
      --model_dir=runs/race --seq_len=512 --max_qa_length=128 --train_steps=12000
  xlnet-race --nodo_train --model_dir=runs/race --eval_path=RACE/test  # evaluate only

(from a checkout: python experiments/run_race.py, same flags.) Every flag is a setting of
RaceConfig (xlnet_tf2/tasks/finetune_config.py); the task is xlnet_tf2/tasks/race.py.
"""

from xlnet_tf2 import cli

cli.quiet_startup()  # before TensorFlow is imported; --verbosity shows its logs
from xlnet_tf2.config_flags import config_from_flags, define_flags  # noqa: E402
from xlnet_tf2.tasks.finetune_config import RaceConfig  # noqa: E402

define_flags(RaceConfig)


def run(argv):
    del argv
    config = config_from_flags(RaceConfig)
    from xlnet_tf2.tasks.race import RaceTask
    from xlnet_tf2.tasks.finetuning import run_finetuning

    print(run_finetuning(RaceTask, config).summary(), flush=True)


def main() -> None:
    """`xlnet-race` and experiments/run_race.py."""
    cli.run(run, usage=__doc__)
