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
  # evaluation, export_saved_model.py and XLNetClassifier.from_preset read
  python experiments/convert_checkpoint.py --source=original --task=classification \
      --checkpoint=finetuned/model.ckpt-1000 --config=.../xlnet_config.json \
      --spm_model=.../spiece.model --label_list=negative,positive --output_dir=converted/imdb

  # back to HuggingFace: one of our directories (LM, pretraining or task) -> config.json +
  # model.safetensors for transformers' XLNetLMHeadModel / XLNetFor*.from_pretrained
  python experiments/convert_checkpoint.py --source=xlnet_tf2 --target=huggingface \
      --checkpoint=converted/imdb --output_dir=hf/imdb

Load our directories with `xlnet_tf2.load_pretrained("converted/base")` (an LM) or
`xlnet_tf2.XLNetClassifier.from_preset("converted/imdb")` (a task). The flags are the
settings of `ConvertConfig` (xlnet_tf2/conversion/convert_config.py).
"""

# The command is xlnet_tf2/commands/convert_checkpoint.py, installed as the console script
# `xlnet-convert`; this file runs it from a checkout.
from xlnet_tf2.commands.convert_checkpoint import main

if __name__ == "__main__":
    main()
