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
--strategy/--tpu/--precision flags; TF Serving picks its own devices.
"""

from absl import flags

from xlnet_tf2 import cli

cli.quiet_startup()  # before TensorFlow is imported; --verbosity shows its logs

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "A directory written by run_classifier.py, "
                    "run_race.py or run_squad.py, or for --task=features any model directory "
                    "(pretraining run, fine-tuning run or converted release).")
flags.DEFINE_enum("task", None, ["classification", "regression", "race", "squad", "features"],
                  "What the exported model computes; must match the model_dir's task.json "
                  "(except features).")
flags.DEFINE_string("export_dir", None, "Base directory; the SavedModel goes to "
                    "EXPORT_DIR/<version>/.")
flags.DEFINE_integer("version", None, "Version sub-directory (default: one more than the "
                     "largest existing).")
flags.DEFINE_enum("checkpoint", "best", ["best", "latest"], "Export the best-evaluation "
                  "weights (best/) or the latest training checkpoint.")
flags.DEFINE_integer("seq_len", None, "For --task=features only: tokens per input (default: the "
                     "model_dir's task.json seq_len, else the pretraining data's seq_len from "
                     "run_config.json, else 512).")
flags.mark_flags_as_required(["model_dir", "task", "export_dir"])


def main(argv):
    del argv
    from xlnet_tf2.export.saved_model import ServingModule, export
    from xlnet_tf2.tasks.finetuned_model import load_task_model

    model, spec, spm_model = load_task_model(FLAGS.model_dir, FLAGS.task, FLAGS.checkpoint)
    if FLAGS.seq_len and FLAGS.task == "features":
        spec = spec.replace(seq_len=FLAGS.seq_len)
    path = export(ServingModule(FLAGS.task, model, spec, spm_model), FLAGS.export_dir,
                  FLAGS.version)
    print(f"SavedModel written to {path}")


if __name__ == "__main__":
    cli.run(main)
