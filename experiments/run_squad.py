"""Fine-tunes XLNet on SQuAD 1.1 or 2.0 (span extraction with a no-answer class).

  python experiments/run_squad.py --train_file=train-v2.0.json --predict_file=dev-v2.0.json \
      --version_2_with_negative --init_checkpoint=converted/large \
      --model_dir=runs/squad2 --seq_len=512 --doc_stride=128 --max_query_length=64 \
      --train_batch_size=48 --learning_rate=3e-5 --layer_decay=0.75 --train_steps=8000 \
      --warmup_steps=1000

Writes checkpoints, best/ (by --best_metric, default f1), best_eval.json, eval_results.jsonl,
task.json, and after each evaluation predictions.json, null_odds.json (SQuAD 2.0) and
nbest_predictions.json into --output_dir (default --model_dir). With --nodo_train it only
predicts and evaluates --predict_file with the model in --model_dir.
"""

import json

from absl import app, flags

from xlnet_tf2 import cli

cli.quiet_startup()  # before TensorFlow is imported; --verbosity shows its logs
from xlnet_tf2.tasks import finetune_flags

FLAGS = flags.FLAGS
finetune_flags.define_common_flags()
flags.DEFINE_string("train_file", None, "Training data: a SQuAD-format JSON file "
                    "(train-v1.1.json or train-v2.0.json). Required when --do_train.")
flags.DEFINE_string("predict_file", None, "Evaluation data: a SQuAD-format JSON file "
                    "(dev-v1.1.json or dev-v2.0.json); predicted and scored with the official "
                    "metrics at every evaluation.")
flags.DEFINE_bool("do_train", True, "Train on --train_file. When false, only predict and "
                  "evaluate --predict_file with the model already in --model_dir (its task.json "
                  "settings and spiece.model are used; --spm_model is then not read).")
flags.DEFINE_enum("checkpoint", "best", ["best", "latest"], "Without training: predict with "
                  "the best-evaluation weights (best/) or the latest training checkpoint.")
flags.DEFINE_bool("version_2_with_negative", False, "SQuAD 2.0: questions may be unanswerable "
                  "(is_impossible); predictions.json holds \"\" for questions whose no-answer "
                  "score exceeds --null_score_threshold, and null_odds.json is written.")
flags.DEFINE_integer("doc_stride", 128, "Tokens between the starts of consecutive document "
                     "windows when a context does not fit in one sequence.")
flags.DEFINE_integer("max_query_length", 64, "The question keeps at most this many (first) "
                     "tokens.")
flags.DEFINE_integer("max_answer_length", 64, "Longest answer considered at prediction time, in "
                     "tokens.")
flags.DEFINE_integer("n_best_size", 5, "Beam width: the top n start positions times, for each, "
                     "the top n end positions; also the number of candidates kept per question "
                     "in nbest_predictions.json.")
flags.DEFINE_float("null_score_threshold", 0.0, "SQuAD 2.0: a question is predicted "
                   "unanswerable when its answer-class logit (null_odds) exceeds this value.")
flags.DEFINE_string("output_dir", None, "Where predictions.json, null_odds.json and "
                    "nbest_predictions.json go (default: --model_dir).")


def main(argv):
    del argv
    from xlnet_tf2.tasks import squad
    from xlnet_tf2.tasks.task_spec import TaskSpec

    if not FLAGS.do_train:
        if not FLAGS.predict_file:
            raise app.UsageError("--nodo_train needs --predict_file.")
        metrics = squad.predict_only(model_dir=FLAGS.model_dir, predict_file=FLAGS.predict_file,
                                     eval_batch_size=FLAGS.eval_batch_size,
                                     output_dir=FLAGS.output_dir, checkpoint=FLAGS.checkpoint,
                                     feature_cache_dir=FLAGS.feature_cache_dir)
        print(json.dumps(metrics, indent=2), flush=True)
        return
    if not FLAGS.train_file:
        raise app.UsageError("--train_file is required when training (--do_train).")
    cfg = finetune_flags.finetune_config("f1")
    model_config, spm_model = finetune_flags.model_config(cfg), finetune_flags.spm_model(cfg)
    strategy = finetune_flags.strategy_from_flags(cfg)
    spec = TaskSpec(task="squad", seq_len=cfg.seq_len, layout="squad", lower=cfg.lower,
                    version_2_with_negative=FLAGS.version_2_with_negative,
                    doc_stride=FLAGS.doc_stride, max_query_length=FLAGS.max_query_length,
                    max_answer_length=FLAGS.max_answer_length, n_best_size=FLAGS.n_best_size,
                    null_score_threshold=FLAGS.null_score_threshold)
    result = squad.run(cfg=cfg, model_config=model_config, spec=spec, spm_model=spm_model,
                       train_file=FLAGS.train_file, predict_file=FLAGS.predict_file,
                       eval_batch_size=cfg.eval_batch_size, output_dir=FLAGS.output_dir,
                       strategy=strategy, head_dropout=cfg.head_dropout)
    finetune_flags.report(result)


if __name__ == "__main__":
    cli.run(main)
