"""Fine-tunes XLNet for token classification (NER, tagging) on CoNLL-format files.

  xlnet-tag --train_file=conll2003/train.txt --eval_file=conll2003/valid.txt \\
      --init_checkpoint=converted/large --model_dir=runs/ner
  xlnet-tag --nodo_train --model_dir=runs/ner --eval_file=conll2003/test.txt  # evaluate only

(from a checkout: python experiments/run_tagger.py, same flags.) Every flag is a setting of
TokenClassificationConfig (xlnet_tf2/tasks/token_classification_config.py); the task is
xlnet_tf2/tasks/token_classification.py.
"""

from xlnet_tf2 import cli

cli.quiet_startup()  # before TensorFlow is imported; --verbosity shows its logs
from xlnet_tf2.config_flags import config_from_flags, define_flags  # noqa: E402
from xlnet_tf2.tasks.token_classification_config import TokenClassificationConfig  # noqa: E402

define_flags(TokenClassificationConfig)


def run(argv):
    del argv
    config = config_from_flags(TokenClassificationConfig)
    from xlnet_tf2.tasks.token_classification import TokenClassificationTask
    from xlnet_tf2.tasks.finetuning import run_finetuning

    print(run_finetuning(TokenClassificationTask, config).summary(), flush=True)


def main() -> None:
    """`xlnet-tag` and experiments/run_tagger.py."""
    cli.run(run, usage=__doc__)
