"""Converts a released XLNet checkpoint into an xlnet-tf2 directory.

  python experiments/convert_checkpoint.py --source=original \
      --checkpoint=xlnet_cased_L-12_H-768_A-12/xlnet_model.ckpt \
      --config=xlnet_cased_L-12_H-768_A-12/xlnet_config.json \
      --spm_model=xlnet_cased_L-12_H-768_A-12/spiece.model --output_dir=converted/base

  python experiments/convert_checkpoint.py --source=huggingface \
      --checkpoint=path/to/save_pretrained_dir --output_dir=converted/hf

Load the result with `xlnet_tf2.load_pretrained("converted/base")`. The flags are the settings
of `ConvertConfig` (xlnet_tf2/conversion/convert_config.py).
"""

from xlnet_tf2 import cli

cli.quiet_startup()  # before TensorFlow is imported; --verbosity shows its logs

from xlnet_tf2.config_flags import config_from_flags, define_flags  # noqa: E402
from xlnet_tf2.conversion.convert_config import ConvertConfig  # noqa: E402

define_flags(ConvertConfig)


def main(argv):
    cli.no_arguments(argv)
    config = config_from_flags(ConvertConfig)  # a bad setting stops here, before TensorFlow
    from xlnet_tf2.conversion.convert import convert_checkpoint, describe_report

    report = convert_checkpoint(config.source, config.checkpoint, config.output_dir,
                                config_path=config.config, spm_model=config.spm_model)
    print(describe_report(report, config.output_dir), flush=True)


if __name__ == "__main__":
    cli.run(main)
