"""Converts checkpoints between the original XLNet release, HuggingFace and xlnet-tf2.

  # the original TF1 release -> xlnet-tf2
  python experiments/convert_checkpoint.py --source=original \
      --checkpoint=xlnet_cased_L-12_H-768_A-12/xlnet_model.ckpt \
      --config=xlnet_cased_L-12_H-768_A-12/xlnet_config.json \
      --spm_model=xlnet_cased_L-12_H-768_A-12/spiece.model --output_dir=converted/base

  # a HuggingFace save_pretrained directory -> xlnet-tf2
  python experiments/convert_checkpoint.py --source=huggingface \
      --checkpoint=path/to/save_pretrained_dir --output_dir=converted/hf

  # a fine-tuned checkpoint WITH its head -> a task directory (task.json + ckpt-0) that
  # run_classifier.py --do_predict, export_saved_model.py and XLNetClassifier.from_preset read
  python experiments/convert_checkpoint.py --source=original --task=classification \
      --checkpoint=finetuned/model.ckpt-1000 --config=.../xlnet_config.json \
      --spm_model=.../spiece.model --label_list=negative,positive --output_dir=converted/imdb

  # back to HuggingFace: one of our directories (LM, pretraining or task) -> config.json +
  # model.safetensors for transformers' XLNetLMHeadModel / XLNetFor*.from_pretrained
  python experiments/convert_checkpoint.py --source=xlnet_tf2 --target=huggingface \
      --checkpoint=converted/imdb --output_dir=hf/imdb

Load our directories with `xlnet_tf2.load_pretrained("converted/base")` (an LM) or
`xlnet_tf2.XLNetClassifier.from_preset("converted/imdb")` (a task).
"""

from absl import flags

from xlnet_tf2 import cli

cli.quiet_startup()  # before TensorFlow is imported; --verbosity shows its logs

FLAGS = flags.FLAGS
flags.DEFINE_enum("source", None, ["original", "huggingface", "xlnet_tf2"],
                  "Where the checkpoint comes from: 'original' for the zihangdai/xlnet TF1 "
                  "release (or a checkpoint its run_*.py fine-tuned), 'huggingface' for a "
                  "transformers save_pretrained directory, 'xlnet_tf2' for one of this "
                  "project's directories (only with --target=huggingface).")
flags.DEFINE_enum("target", "xlnet_tf2", ["xlnet_tf2", "huggingface"],
                  "The format to write: this project's ('xlnet_tf2') or HuggingFace's "
                  "config.json + model.safetensors ('huggingface').")
flags.DEFINE_string("checkpoint", None,
                    "For --source=original, the TF1 checkpoint prefix (e.g. .../xlnet_model.ckpt, "
                    "without .index). For --source=huggingface or xlnet_tf2, the directory.")
flags.DEFINE_string("config", None,
                    "For --source=original, the xlnet_config.json of the release. Defaults to "
                    "xlnet_config.json beside the checkpoint. Ignored otherwise.")
flags.DEFINE_string("spm_model", None,
                    "Optional SentencePiece model (spiece.model) to copy into the output directory "
                    "(for --source=xlnet_tf2, the directory's own spiece.model is the default).")
flags.DEFINE_string("output_dir", None, "Directory to write the converted checkpoint into.")
flags.DEFINE_enum("task", None, ["classification", "regression", "squad", "race"],
                  "Convert a fine-tuned checkpoint with its task head into a task directory "
                  "(task.json + checkpoint). Without it only the backbone converts and head "
                  "tensors are reported as unused. Not for --source=xlnet_tf2 (its task.json "
                  "says the task).")
flags.DEFINE_integer("seq_len", None,
                     "The sequence length the head was fine-tuned with (written to task.json). "
                     "Default: the original's max_seq_length for the task (128 for "
                     "classification/regression, 512 for squad and race).")
flags.DEFINE_list("label_list", None,
                  "Classification label names in id order, e.g. negative,positive. Default: "
                  "the HuggingFace config's id2label, else 0,1,...")
flags.DEFINE_enum("summary_type", None, ["last", "first", "mean", "attn"],
                  "For --source=original: the --summary_type the checkpoint was fine-tuned with "
                  "(default last, the original's). HuggingFace configs say their own. Only "
                  "last and first compute the same here; mean and attn are refused.")
flags.DEFINE_string("cls_scope", None,
                    "For --source=original classification/regression: the <scope> of the "
                    "head's model/classification_<scope>/logit variables (the original's "
                    "--cls_scope or task name). Default: the only one in the checkpoint.")
flags.DEFINE_bool("paired", False,
                  "Classification/regression: the inputs are text pairs (written to task.json "
                  "for serving).")
flags.DEFINE_integer("num_choices", 4, "For --task=race: the number of answer options per question (4 in RACE).")
flags.mark_flags_as_required(["source", "checkpoint", "output_dir"])


def main(argv):
    del argv
    from xlnet_tf2.conversion import TaskOptions, convert_checkpoint

    task = None
    if FLAGS.task:
        task = TaskOptions(FLAGS.task, seq_len=FLAGS.seq_len, label_list=FLAGS.label_list,
                           summary_type=FLAGS.summary_type, cls_scope=FLAGS.cls_scope,
                           paired=FLAGS.paired, num_choices=FLAGS.num_choices)
    report = convert_checkpoint(FLAGS.source, FLAGS.checkpoint, FLAGS.output_dir,
                                config_path=FLAGS.config, spm_model=FLAGS.spm_model,
                                task=task, target=FLAGS.target)
    if FLAGS.source != "xlnet_tf2":
        head = f" with the {FLAGS.task} head" if task else ""
        print(f"Converted {report['converted']} tensors{head}; skipped "
              f"{len(report['skipped'])} optimizer/step variables; {len(report['unused'])} "
              f"tensors not converted; {len(report['initialized'])} pretraining-only tensors "
              "absent (left initialized).", flush=True)
        for note in report["notes"]:
            print(f"note: {note}", flush=True)
    if FLAGS.target == "huggingface":
        print(f"Wrote a HuggingFace {report['architecture']} to {FLAGS.output_dir}.", flush=True)
    else:
        print(f"Wrote {FLAGS.output_dir}.", flush=True)

if __name__ == "__main__":
    cli.run(main)
