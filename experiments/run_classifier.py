"""Fine-tunes XLNet for sentence(-pair) classification or regression.

  python experiments/run_classifier.py --task=classification \
      --train_file=train.tsv --eval_file=dev.tsv --text_a_column=sentence --label_column=label \
      --init_checkpoint=converted/large --model_dir=runs/sst2 --seq_len=128 --train_steps=1200

--init_checkpoint may be a converted release or a pretraining --model_dir: its
xlnet_config.json and spiece.model are the defaults of --model_config and --spm_model.

or `--tfds_name=glue/sst2` instead of the files. Writes checkpoints, best/ (best evaluation),
best_eval.json, eval_results.jsonl and task.json into --model_dir; export it with
experiments/export_saved_model.py.
"""

from absl import flags

from xlnet_tf2 import cli

cli.quiet_startup()  # before TensorFlow is imported; --verbosity shows its logs
from xlnet_tf2.tasks import finetune_flags

FLAGS = flags.FLAGS
finetune_flags.define_common_flags()
flags.DEFINE_enum("task", "classification", ["classification", "regression"],
                  "Classification (softmax over the label set) or regression (one score, MSE).")
flags.DEFINE_string("train_file", None, "Training data: a .tsv/.csv with a header row or a "
                    ".jsonl file; columns are chosen with the *_column flags.")
flags.DEFINE_string("eval_file", None, "Evaluation data in the same format as --train_file.")
flags.DEFINE_string("tfds_name", None, "A TensorFlow Datasets name (e.g. glue/sst2, glue/mnli, "
                    "glue/stsb, imdb_reviews) used instead of --train_file/--eval_file; the data "
                    "must be prepared in --tfds_data_dir (or downloadable).")
flags.DEFINE_string("tfds_train_split", "train", "The TFDS split to train on.")
flags.DEFINE_string("tfds_eval_split", None, "The TFDS split to evaluate on (default: the "
                    "dataset's validation split, e.g. validation_matched for glue/mnli).")
flags.DEFINE_string("tfds_data_dir", None, "The TensorFlow Datasets data directory (default: TFDS's own, ~/tensorflow_datasets).")
flags.DEFINE_string("text_a_column", None, "Name of the column holding the (first) text.")
flags.DEFINE_string("text_b_column", None, "Name of the column holding the second text of a "
                    "pair task; leave unset for single-text tasks.")
flags.DEFINE_string("label_column", None, "Name of the column holding the label.")
flags.DEFINE_list("labels", None, "The label set in output order (e.g. 0,1). Default: the "
                  "TFDS class names, or the sorted distinct labels of the training file. A label "
                  "outside this set is an error naming the file and record.")
flags.DEFINE_enum("summary_type", "last", ["last", "first", "mean", "attn"],
                  "How the sequence is pooled: last (the original <cls>-last, left-padded "
                  "layout), first (<cls> first, right-padded), mean (over real tokens only) or "
                  "attn (a learned query attending over real tokens).")


def main(argv):
    del argv
    from xlnet_tf2.tasks import classification
    from xlnet_tf2.tokenizers.packing import layout_for_summary
    from xlnet_tf2.tasks.task_spec import TaskSpec

    default_metric = "pearson" if FLAGS.task == "regression" else "accuracy"
    cfg = finetune_flags.finetune_config(default_metric)
    model_config, spm_model = finetune_flags.model_config(cfg), finetune_flags.spm_model(cfg)
    strategy = finetune_flags.strategy_from_flags(cfg)
    train, evaluation, label_list, train_source, eval_source = classification.load_examples(
        task=FLAGS.task, train_file=FLAGS.train_file, eval_file=FLAGS.eval_file,
        tfds_name=FLAGS.tfds_name, tfds_train_split=FLAGS.tfds_train_split,
        tfds_eval_split=FLAGS.tfds_eval_split, tfds_data_dir=FLAGS.tfds_data_dir,
        text_a_column=FLAGS.text_a_column, text_b_column=FLAGS.text_b_column,
        label_column=FLAGS.label_column, labels=FLAGS.labels)
    spec = TaskSpec(task=FLAGS.task, seq_len=cfg.seq_len, summary_type=FLAGS.summary_type,
                    layout=layout_for_summary(FLAGS.summary_type), label_list=label_list,
                    paired=any(e.text_b is not None for e in train), lower=cfg.lower)
    result = classification.run(
        cfg=cfg, model_config=model_config, spec=spec, spm_model=spm_model,
        train_examples=train, eval_examples=evaluation, train_source=train_source,
        eval_source=eval_source, eval_batch_size=cfg.eval_batch_size, strategy=strategy,
        head_dropout=cfg.head_dropout)
    finetune_flags.report(result)


if __name__ == "__main__":
    cli.run(main)
