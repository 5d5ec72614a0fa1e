"""Converts checkpoints between the original XLNet release, HuggingFace and xlnet-tf2.

  # the original TF1 release -> xlnet-tf2
  xlnet-convert --source=original \\
      --checkpoint=xlnet_cased_L-12_H-768_A-12/xlnet_model.ckpt \\
      --config=xlnet_cased_L-12_H-768_A-12/xlnet_config.json \\
      --spm_model=xlnet_cased_L-12_H-768_A-12/spiece.model --output_dir=converted/base

  # a HuggingFace save_pretrained directory -> xlnet-tf2
  xlnet-convert --source=huggingface \\
      --checkpoint=path/to/save_pretrained_dir --output_dir=converted/hf

  # a fine-tuned checkpoint WITH its head -> a task directory (task.json + ckpt-0) that
  # evaluation, xlnet-export and XLNetClassifier.from_preset read
  xlnet-convert --source=original --task=classification \\
      --checkpoint=finetuned/model.ckpt-1000 --config=.../xlnet_config.json \\
      --spm_model=.../spiece.model --label_list=negative,positive --output_dir=converted/imdb

  # back to HuggingFace: one of our directories (LM, pretraining or task) -> config.json +
  # model.safetensors for transformers' XLNetLMHeadModel / XLNetFor*.from_pretrained
  xlnet-convert --source=xlnet_tf2 --target=huggingface \\
      --checkpoint=converted/imdb --output_dir=hf/imdb

(from a checkout: python experiments/convert_checkpoint.py, same flags.) Load our directories
with `xlnet_tf2.load_pretrained("converted/base")` (an LM) or
`xlnet_tf2.XLNetClassifier.from_preset("converted/imdb")` (a task). The flags are the
settings of `ConvertConfig` (xlnet_tf2/conversion/convert_config.py).
"""

from xlnet_tf2 import cli

cli.quiet_startup()  # before TensorFlow is imported; --verbosity shows its logs

from xlnet_tf2.config_flags import config_from_flags, define_flags  # noqa: E402
from xlnet_tf2.conversion.convert_config import ConvertConfig  # noqa: E402

define_flags(ConvertConfig)


def run(argv):
    cli.no_arguments(argv)
    config = config_from_flags(ConvertConfig)  # a bad setting stops here, before TensorFlow
    from xlnet_tf2.conversion.convert import TaskOptions, describe_report
    from xlnet_tf2.models.directories import convert_checkpoint

    task = None
    if config.task:
        task = TaskOptions(config.task, seq_len=config.seq_len, label_list=config.label_list,
                           summary_type=config.summary_type, cls_scope=config.cls_scope,
                           paired=config.paired, num_choices=config.num_choices)
    report = convert_checkpoint(config.source, config.checkpoint, config.output_dir,
                                config_path=config.config, spm_model=config.spm_model,
                                task=task, target=config.target,
                                overwrite=config.overwrite)
    print(describe_report(report, config.output_dir), flush=True)


def main() -> None:
    """`xlnet-convert` and experiments/convert_checkpoint.py."""
    cli.run(run, usage=__doc__)
