"""Pretrains XLNet on data prepared by data_prep/create_tfrecords.py.

    python experiments/run_pretrain.py --data_dir=data/pretrain --model_dir=runs/base \
        --model_config=base --train_batch_size=256 --train_steps=100000

A run whose --model_dir already holds checkpoints resumes from the newest readable one
(weights, optimizer, step, Transformer-XL memory and data position). Every flag is a setting
of PretrainConfig (xlnet_tf2/tasks/pretraining_config.py); the task is
xlnet_tf2/tasks/pretraining.py. Exit status: 0 done, 2 bad input (one line naming the flag,
file or checkpoint), 3 the run stopped (the loss diverged or the data ran out), 75 preempted (a
SIGTERM or termination notice: stopped after a step with its checkpoint; run it again).
"""

# The command is xlnet_tf2/commands/run_pretrain.py, installed as the console script
# `xlnet-pretrain`; this file runs it from a checkout.
from xlnet_tf2.commands.run_pretrain import main

if __name__ == "__main__":
    main()
