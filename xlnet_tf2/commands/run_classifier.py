"""Fine-tunes XLNet for sentence(-pair) classification or regression.

  xlnet-classify --kind=classification \\
      --train_file=train.tsv --eval_file=dev.tsv --text_a_column=sentence --label_column=label \\
      --init_checkpoint=converted/large --model_dir=runs/sst2 --seq_len=128 --train_steps=1200
  xlnet-classify --nodo_train --model_dir=runs/sst2 --eval_file=test.tsv \\
      --text_a_column=sentence --label_column=label     # evaluate a trained model_dir

(from a checkout: python experiments/run_classifier.py, same flags.) --init_checkpoint takes
whatever from_pretrained takes (a converted release, a pretraining --model_dir, a HuggingFace
directory or hub id, ...): its architecture and spiece.model are the defaults of
--model_config and --spm_model. With --nodo_train, as every fine-tuning command, it only
evaluates the trained model in --model_dir.

or `--tfds_name=glue/sst2` instead of the files. Writes checkpoints, best/ (best evaluation),
best_eval.json, eval_results.jsonl and task.json into --model_dir; export it with
xlnet-export. Every flag is a setting of ClassificationConfig
(xlnet_tf2/tasks/finetune_config.py); the task is xlnet_tf2/tasks/classification.py.
"""

from xlnet_tf2 import cli

cli.quiet_startup()  # before TensorFlow is imported; --verbosity shows its logs
from xlnet_tf2.config_flags import config_from_flags, define_flags  # noqa: E402
from xlnet_tf2.tasks.finetune_config import ClassificationConfig  # noqa: E402

define_flags(ClassificationConfig)


def run(argv):
    del argv
    config = config_from_flags(ClassificationConfig)
    from xlnet_tf2.tasks.classification import ClassificationTask
    from xlnet_tf2.tasks.finetuning import run_finetuning

    print(run_finetuning(ClassificationTask, config).summary(), flush=True)


def main() -> None:
    """`xlnet-classify` and experiments/run_classifier.py."""
    cli.run(run, usage=__doc__)
