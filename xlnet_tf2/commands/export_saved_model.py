"""Exports a model directory as a SavedModel that TF Serving loads: EXPORT_DIR/<version>/ with
`serving_default` (raw UTF-8 text in) and `serve_token_ids` (int32 ids, segment ids, mask in).

  xlnet-export --model_dir=runs/sst2 --export_dir=exports/sst2
  xlnet-export --model_dir=runs/pretrain --kind=features --export_dir=exports/features

(from a checkout: python experiments/export_saved_model.py, same flags.) --model_dir is a
fine-tuning run (its task.json says what it computes: --kind, when given, is only checked
against it), or for --kind=features any model directory: a pretraining run, a fine-tuning run
or a converted release. Everything needed
(architecture, SentencePiece model, weights, sequence length) is read from it. Export runs on
the host in float32 (the served numbers are the checkpoint's), so this command has no
--strategy/--tpu/--precision flags; TF Serving picks its own devices. The flags are the
settings of `ExportConfig` (xlnet_tf2/export/export_config.py).
"""

from xlnet_tf2 import cli

cli.quiet_startup()  # before TensorFlow is imported; --verbosity shows its logs

from xlnet_tf2.config_flags import config_from_flags, define_flags  # noqa: E402
from xlnet_tf2.export.export_config import ExportConfig  # noqa: E402

define_flags(ExportConfig)


def run(argv):
    del argv
    config = config_from_flags(ExportConfig)  # a bad setting stops here, before TensorFlow
    from xlnet_tf2.export.saved_model import export_model_dir

    path = export_model_dir(config)
    print(f"SavedModel written to {path}")


def main() -> None:
    """`xlnet-export` and experiments/export_saved_model.py."""
    cli.run(run, usage=__doc__)
