"""Fine-tunes XLNet on RACE-format multiple choice (4 options, softmax over them).

  python experiments/run_race.py --train_path=RACE/train --eval_path=RACE/dev \
      --init_checkpoint=converted/large \
      --model_dir=runs/race --seq_len=512 --max_qa_length=128 --train_steps=12000

Every flag is a setting of RaceConfig (xlnet_tf2/tasks/finetune_config.py); the task is
xlnet_tf2/tasks/race.py.
"""

# The command is xlnet_tf2/commands/run_race.py, installed as the console script
# `xlnet-race`; this file runs it from a checkout.
from xlnet_tf2.commands.run_race import main

if __name__ == "__main__":
    main()
