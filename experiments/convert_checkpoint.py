"""Converts a released XLNet checkpoint into an xlnet-tf2 directory.

  python experiments/convert_checkpoint.py --source=original \
      --checkpoint=xlnet_cased_L-12_H-768_A-12/xlnet_model.ckpt \
      --config=xlnet_cased_L-12_H-768_A-12/xlnet_config.json \
      --spm_model=xlnet_cased_L-12_H-768_A-12/spiece.model --output_dir=converted/base

  python experiments/convert_checkpoint.py --source=huggingface \
      --checkpoint=path/to/save_pretrained_dir --output_dir=converted/hf

Load the result with `xlnet_tf2.load_pretrained("converted/base")`.
"""

from absl import flags

from xlnet_tf2 import cli

cli.quiet_startup()  # before TensorFlow is imported; --verbosity shows its logs

FLAGS = flags.FLAGS
flags.DEFINE_enum("source", None, ["original", "huggingface"],
                  "Where the checkpoint comes from: 'original' for the zihangdai/xlnet TF1 "
                  "release, 'huggingface' for a transformers save_pretrained directory.")
flags.DEFINE_string("checkpoint", None,
                    "For --source=original, the TF1 checkpoint prefix (e.g. .../xlnet_model.ckpt, "
                    "without .index). For --source=huggingface, the save_pretrained directory.")
flags.DEFINE_string("config", None,
                    "For --source=original, the xlnet_config.json of the release. Defaults to "
                    "xlnet_config.json beside the checkpoint. Ignored for HuggingFace.")
flags.DEFINE_string("spm_model", None,
                    "Optional SentencePiece model (spiece.model) to copy into the output directory.")
flags.DEFINE_string("output_dir", None, "Directory to write the converted checkpoint into.")
flags.mark_flags_as_required(["source", "checkpoint", "output_dir"])


def main(argv):
    del argv
    from xlnet_tf2.conversion import convert_checkpoint

    report = convert_checkpoint(FLAGS.source, FLAGS.checkpoint, FLAGS.output_dir,
                                config_path=FLAGS.config, spm_model=FLAGS.spm_model)
    print(f"Converted {report['converted']} tensors into {FLAGS.output_dir}; skipped "
          f"{len(report['skipped'])} optimizer/step variables; {len(report['unused'])} task-head "
          f"tensors not converted; {len(report['initialized'])} pretraining-only tensors absent "
          "(left initialized).", flush=True)
    for note in report["notes"]:
        print(f"note: {note}", flush=True)


if __name__ == "__main__":
    cli.run(main)
