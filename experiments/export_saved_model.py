"""Exports a fine-tuned (or, with --task=features, any) model directory as a SavedModel that
TF Serving loads: EXPORT_DIR/<version>/ with `serving_default` (raw UTF-8 text in) and
`serve_token_ids` (int32 ids, segment ids, mask in).

  python experiments/export_saved_model.py --model_dir=runs/sst2 --task=classification \
      --export_dir=exports/sst2
"""

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "A directory written by run_classifier.py, "
                    "run_race.py or run_squad.py, or for --task=features any directory with "
                    "xlnet_config.json, spiece.model and a backbone checkpoint.")
flags.DEFINE_enum("task", None, ["classification", "regression", "race", "squad", "features"],
                  "What the exported model computes; must match the model_dir's task.json "
                  "(except features).")
flags.DEFINE_string("export_dir", None, "Base directory; the SavedModel goes to "
                    "EXPORT_DIR/<version>/.")
flags.DEFINE_integer("version", None, "Version sub-directory (default: one more than the "
                     "largest existing).")
flags.DEFINE_enum("checkpoint", "best", ["best", "latest"], "Export the best-evaluation "
                  "weights (best/) or the latest training checkpoint.")
flags.DEFINE_integer("seq_len", None, "features only: tokens per input (default: the "
                     "model_dir's task.json seq_len, else 512).")
flags.mark_flags_as_required(["model_dir", "task", "export_dir"])


def main(argv):
    del argv
    from xlnet_tf2.export.saved_model import ServingModule, export, load_task_model

    model, spec, spm_model = load_task_model(FLAGS.model_dir, FLAGS.task, FLAGS.checkpoint)
    if FLAGS.seq_len and FLAGS.task == "features":
        spec = spec.replace(seq_len=FLAGS.seq_len)
    path = export(ServingModule(FLAGS.task, model, spec, spm_model), FLAGS.export_dir,
                  FLAGS.version)
    print(f"SavedModel written to {path}")


if __name__ == "__main__":
    app.run(main)
