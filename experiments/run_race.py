"""Fine-tunes XLNet on RACE-format multiple choice (4 options, softmax over them).

  python experiments/run_race.py --train_path=RACE/train --eval_path=RACE/dev \
      --spm_model=spiece.model --model_config=xlnet_config.json --init_checkpoint=converted/ \
      --model_dir=runs/race --seq_len=512 --max_qa_length=128 --train_steps=12000
"""

from absl import app, flags

from xlnet_tf2.finetuning import cli_flags

FLAGS = flags.FLAGS
cli_flags.define_common_flags(default_best_metric="accuracy")
flags.DEFINE_string("train_path", None, "A RACE JSON file or a directory of them (searched "
                    "recursively, e.g. RACE/train covering high/ and middle/).")
flags.DEFINE_string("eval_path", None, "Evaluation RACE file or directory.")
flags.DEFINE_integer("max_qa_length", 128, "Tokens kept of question+option (its last ones).")
flags.mark_flags_as_required(["train_path"])


def main(argv):
    del argv
    from xlnet_tf2.finetuning import race
    from xlnet_tf2.finetuning.task_spec import TaskSpec

    strategy = cli_flags.strategy_from_flags()
    spec = TaskSpec(task="race", seq_len=FLAGS.seq_len, max_qa_length=FLAGS.max_qa_length,
                    lower=FLAGS.lower)
    result = race.run(cfg=cli_flags.finetune_config("accuracy"),
                      model_config=cli_flags.model_config(), spec=spec,
                      spm_model=FLAGS.spm_model, train_path=FLAGS.train_path,
                      eval_path=FLAGS.eval_path, eval_batch_size=FLAGS.eval_batch_size,
                      strategy=strategy, head_dropout=FLAGS.head_dropout)
    cli_flags.report(result)


if __name__ == "__main__":
    app.run(main)
