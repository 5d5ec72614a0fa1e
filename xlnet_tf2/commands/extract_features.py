"""Per-token and pooled XLNet features of a text file (one text per line).

  xlnet-extract-features --model_dir=converted/xlnet_cased_L-24_H-1024_A-16 \\
      --input_file=texts.txt --output_file=features.npz --seq_len=128

(from a checkout: python experiments/extract_features.py, same flags.) --model_dir: any model
directory (a converted release, a pretraining run or a fine-tuning run): its
xlnet_config.json, spiece.model and checkpoint are used, with no dropout, memory or bi_data (a
pretraining run's data layout does not carry over). Each line is encoded alone as
`text <sep> <cls>`, left padded to --seq_len (longer lines keep their first seq_len-2 tokens);
the numbers are those of `xlnet-export --kind=features` (same code,
xlnet_tf2/export/feature_extraction.py). --strategy, --tpu and --precision work as in the
training commands (features are float32 whatever the compute precision). Output by extension
(xlnet_tf2/export/feature_files.py):
  .npz   token_features [E, L, D] float32, pooled [E, D] (mean over real tokens), input_ids and
         attention_mask [E, L] int32 (1 = real token; padding is on the left), texts [E]
  .jsonl one object per line: {"index", "text", "pieces": [real tokens, <sep> and <cls> last],
         "token_features": [[D floats] per real token], "pooled": [D floats]}
The flags are the settings of `ExtractConfig` (xlnet_tf2/export/export_config.py).
"""

from xlnet_tf2 import cli

cli.quiet_startup()  # before TensorFlow is imported; --verbosity shows its logs

from xlnet_tf2.config_flags import config_from_flags, define_flags  # noqa: E402
from xlnet_tf2.export.export_config import ExtractConfig  # noqa: E402

define_flags(ExtractConfig)


def run(argv):
    del argv
    config = config_from_flags(ExtractConfig)  # a bad setting stops here, before TensorFlow
    from xlnet_tf2.export.feature_files import extract_to_file

    count, seq_len = extract_to_file(config)
    print(f"{count} texts, seq_len {seq_len}: features written to {config.output_file}")


def main() -> None:
    """`xlnet-extract-features` and experiments/extract_features.py."""
    cli.run(run, usage=__doc__)
