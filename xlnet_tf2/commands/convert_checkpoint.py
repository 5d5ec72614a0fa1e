"""Converts checkpoints between the original XLNet release, HuggingFace and xlnet-tf2.

  # the original TF1 release -> xlnet-tf2
  xlnet-convert --source=original \\
      --checkpoint=xlnet_cased_L-12_H-768_A-12/xlnet_model.ckpt \\
      --config=xlnet_cased_L-12_H-768_A-12/xlnet_config.json \\
      --spm_model=xlnet_cased_L-12_H-768_A-12/spiece.model --output_dir=converted/base

  # one of our directories (LM, pretraining or task) -> HuggingFace (config.json + safetensors)
  xlnet-convert --source=xlnet_tf2 --target=huggingface \\
      --checkpoint=converted/base --output_dir=hf/base

(from a checkout: python experiments/convert_checkpoint.py, same flags.) --source=huggingface
reads a save_pretrained directory; --kind converts a fine-tuned checkpoint with its head into a
task directory. More examples: README.md, "Converting released checkpoints". The flags are
the settings of `ConvertConfig` (xlnet_tf2/conversion/convert_config.py).
"""

from xlnet_tf2 import cli

cli.quiet_startup()  # before TensorFlow is imported; --verbosity shows its logs

from xlnet_tf2.config_flags import config_from_flags, define_flags  # noqa: E402
from xlnet_tf2.conversion.convert_config import ConvertConfig  # noqa: E402

define_flags(ConvertConfig)


def run(argv):
    del argv
    config = config_from_flags(ConvertConfig)  # a bad setting stops here, before TensorFlow
    from xlnet_tf2.conversion.convert import HeadOptions, describe_report
    from xlnet_tf2.models.directories import convert_checkpoint

    head = None
    if config.kind:
        head = HeadOptions(config.kind, seq_len=config.seq_len, label_list=config.label_list,
                           summary_type=config.summary_type, cls_scope=config.cls_scope,
                           paired=config.paired, num_choices=config.num_choices)
    report = convert_checkpoint(config.source, config.checkpoint, config.output_dir,
                                config_path=config.config, spm_model=config.spm_model,
                                head=head, target=config.target,
                                overwrite=config.overwrite)
    print(describe_report(report, config.output_dir), flush=True)


def main() -> None:
    """`xlnet-convert` and experiments/convert_checkpoint.py."""
    cli.run(run, usage=__doc__)
