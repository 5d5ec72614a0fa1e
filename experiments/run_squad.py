"""Fine-tunes XLNet on SQuAD 1.1 or 2.0 (span extraction with a no-answer class).

  python experiments/run_squad.py --train_file=train-v2.0.json --predict_file=dev-v2.0.json \
      --version_2_with_negative --init_checkpoint=converted/large \
      --model_dir=runs/squad2 --seq_len=512 --doc_stride=128 --max_query_length=64 \
      --train_batch_size=48 --learning_rate=3e-5 --layer_decay=0.75 --train_steps=8000 \
      --warmup_steps=1000

Writes checkpoints, best/ (by --best_metric, default f1), best_eval.json, eval_results.jsonl,
task.json, and after each evaluation predictions.json, null_odds.json (SQuAD 2.0) and
nbest_predictions.json into --output_dir (default --model_dir). With --nodo_train it only
predicts and evaluates --predict_file with the model in --model_dir. Every flag is a setting
of SquadConfig (xlnet_tf2/tasks/finetune_config.py); the task is xlnet_tf2/tasks/squad.py.
"""

# The command is xlnet_tf2/commands/run_squad.py, installed as the console script
# `xlnet-squad`; this file runs it from a checkout.
from xlnet_tf2.commands.run_squad import main

if __name__ == "__main__":
    main()
