"""Exports a model directory as a SavedModel that TF Serving loads: EXPORT_DIR/<version>/ with
`serving_default` (raw UTF-8 text in) and `serve_token_ids` (int32 ids, segment ids, mask in).

  python experiments/export_saved_model.py --model_dir=runs/sst2 --task=classification \
      --export_dir=exports/sst2
  python experiments/export_saved_model.py --model_dir=runs/pretrain --task=features \
      --export_dir=exports/features

--model_dir is a fine-tuning run (its task.json says what it computes), or for --task=features
any model directory: a pretraining run, a fine-tuning run or a converted release. Everything
needed (architecture, SentencePiece model, weights, sequence length) is read from it. Export
runs on the host in float32 (the served numbers are the checkpoint's), so this command has no
--strategy/--tpu/--precision flags; TF Serving picks its own devices. The flags are the
settings of `ExportConfig` (xlnet_tf2/export/export_config.py).
"""

# The command is xlnet_tf2/commands/export_saved_model.py, installed as the console script
# `xlnet-export`; this file runs it from a checkout.
from xlnet_tf2.commands.export_saved_model import main

if __name__ == "__main__":
    main()
