"""Fine-tunes XLNet for sentence(-pair) classification or regression.

  python experiments/run_classifier.py --task=classification \
      --train_file=train.tsv --eval_file=dev.tsv --text_a_column=sentence --label_column=label \
      --init_checkpoint=converted/large --model_dir=runs/sst2 --seq_len=128 --train_steps=1200

--init_checkpoint may be a converted release or a pretraining --model_dir: its
xlnet_config.json and spiece.model are the defaults of --model_config and --spm_model.

or `--tfds_name=glue/sst2` instead of the files. Writes checkpoints, best/ (best evaluation),
best_eval.json, eval_results.jsonl and task.json into --model_dir; export it with
experiments/export_saved_model.py. Every flag is a setting of ClassificationConfig
(xlnet_tf2/tasks/finetune_config.py); the task is xlnet_tf2/tasks/classification.py.
"""

# The command is xlnet_tf2/commands/run_classifier.py, installed as the console script
# `xlnet-classify`; this file runs it from a checkout.
from xlnet_tf2.commands.run_classifier import main

if __name__ == "__main__":
    main()
