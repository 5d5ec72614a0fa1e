"""Per-token and pooled XLNet features of a text file (one text per line).

  python experiments/extract_features.py --model_dir=converted/xlnet_cased_L-24_H-1024_A-16 \
      --input_file=texts.txt --output_file=features.npz --seq_len=128

--model_dir: any model directory (a converted release, a pretraining run or a fine-tuning
run): its xlnet_config.json, spiece.model and checkpoint are used, with no dropout, memory or
bi_data (a pretraining run's data layout does not carry over). Each line is encoded alone as
`text <sep> <cls>`, left padded to --seq_len (longer lines keep their first seq_len-2 tokens);
the numbers are those of `export_saved_model.py --task=features` (same code,
xlnet_tf2/export/feature_extraction.py). --strategy, --tpu and --precision work as in the
training commands (features are float32 whatever the compute precision). Output by extension
(xlnet_tf2/export/feature_files.py):
  .npz   token_features [E, L, D] float32, pooled [E, D] (mean over real tokens), input_ids and
         attention_mask [E, L] int32 (1 = real token; padding is on the left), texts [E]
  .jsonl one object per line: {"index", "text", "pieces": [real tokens, <sep> and <cls> last],
         "token_features": [[D floats] per real token], "pooled": [D floats]}
The flags are the settings of `ExtractConfig` (xlnet_tf2/export/export_config.py).
"""

# The command is xlnet_tf2/commands/extract_features.py, installed as the console script
# `xlnet-extract-features`; this file runs it from a checkout.
from xlnet_tf2.commands.extract_features import main

if __name__ == "__main__":
    main()
