"""Fine-tunes XLNet on SQuAD 1.1 or 2.0 (span extraction with a no-answer class).

  xlnet-squad --train_file=train-v2.0.json --predict_file=dev-v2.0.json \\
      --version_2_with_negative --init_checkpoint=converted/large \\
      --model_dir=runs/squad2 --seq_len=512 --doc_stride=128 --max_query_length=64 \\
      --train_batch_size=48 --learning_rate=3e-5 --layer_decay=0.75 --train_steps=8000 \\
      --warmup_steps=1000

(from a checkout: python experiments/run_squad.py, same flags.) Writes checkpoints, best/ (by
--best_metric, default f1), best_eval.json, eval_results.jsonl, task.json, and after each
evaluation predictions.json, null_odds.json (SQuAD 2.0) and nbest_predictions.json into
--output_dir (default --model_dir). With --nodo_train it only predicts and evaluates
--predict_file with the model in --model_dir. Every flag is a setting of SquadConfig
(xlnet_tf2/tasks/finetune_config.py); the task is xlnet_tf2/tasks/squad.py.
"""

from xlnet_tf2 import cli

cli.quiet_startup()  # before TensorFlow is imported; --verbosity shows its logs
from xlnet_tf2.config_flags import config_from_flags, define_flags  # noqa: E402
from xlnet_tf2.tasks.finetune_config import SquadConfig  # noqa: E402

define_flags(SquadConfig)


def run(argv):
    del argv
    config = config_from_flags(SquadConfig)
    from xlnet_tf2.tasks.finetuning import run_finetuning
    from xlnet_tf2.tasks.squad import SquadTask

    print(run_finetuning(SquadTask, config).summary(), flush=True)


def main() -> None:
    """`xlnet-squad` and experiments/run_squad.py."""
    cli.run(run, usage=__doc__)
