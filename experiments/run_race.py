"""Fine-tunes XLNet on RACE-format multiple choice (4 options, softmax over them).

  python experiments/run_race.py --train_path=RACE/train --eval_path=RACE/dev \
      --init_checkpoint=converted/large \
      --model_dir=runs/race --seq_len=512 --max_qa_length=128 --train_steps=12000
"""

from absl import flags

from xlnet_tf2 import cli

cli.quiet_startup()  # before TensorFlow is imported; --verbosity shows its logs
from xlnet_tf2.tasks import finetune_flags

FLAGS = flags.FLAGS
finetune_flags.define_common_flags()
flags.DEFINE_string("train_path", None, "A RACE JSON file or a directory of them (searched "
                    "recursively, e.g. RACE/train covering high/ and middle/).")
flags.DEFINE_string("eval_path", None, "Evaluation RACE file or directory.")
flags.DEFINE_integer("max_qa_length", 128, "Tokens kept of question+option (its last ones).")
flags.mark_flags_as_required(["train_path"])


def main(argv):
    del argv
    from xlnet_tf2.tasks import race
    from xlnet_tf2.tasks.task_spec import TaskSpec

    cfg = finetune_flags.finetune_config("accuracy")
    model_config, spm_model = finetune_flags.model_config(cfg), finetune_flags.spm_model(cfg)
    strategy = finetune_flags.strategy_from_flags(cfg)
    spec = TaskSpec(task="race", seq_len=cfg.seq_len, max_qa_length=FLAGS.max_qa_length,
                    lower=cfg.lower)
    result = race.run(cfg=cfg, model_config=model_config, spec=spec, spm_model=spm_model,
                      train_path=FLAGS.train_path, eval_path=FLAGS.eval_path,
                      eval_batch_size=cfg.eval_batch_size, strategy=strategy,
                      head_dropout=cfg.head_dropout)
    finetune_flags.report(result)


if __name__ == "__main__":
    cli.run(main)
