"""Per-token and pooled XLNet features of a text file (one text per line).

  python experiments/extract_features.py --model_dir=converted/xlnet_cased_L-24_H-1024_A-16 \
      --input_file=texts.txt --output_file=features.npz --seq_len=128

--model_dir: any model directory (a converted release, a pretraining run or a fine-tuning
run): its xlnet_config.json, spiece.model and checkpoint are used, with no dropout, memory or
bi_data (a pretraining run's data layout does not carry over). Each line is encoded alone as
`text <sep> <cls>`, left padded to --seq_len (longer lines keep their first seq_len-2 tokens);
the numbers are those of `export_saved_model.py --task=features` (same code,
xlnet_tf2/export/feature_extraction.py). --strategy, --tpu and --precision work as in the
training commands (features are float32 whatever the compute precision). Output by extension:
  .npz   token_features [N, L, D] float32, pooled [N, D] (mean over real tokens), input_ids and
         attention_mask [N, L] int32 (1 = real token; padding is on the left), texts [N]
  .jsonl one object per line: {"index", "text", "pieces": [real tokens, <sep> and <cls> last],
         "token_features": [[D floats] per real token], "pooled": [D floats]}
"""

import io
import json

from absl import app, flags

from xlnet_tf2 import cli

cli.quiet_startup()  # before TensorFlow is imported; --verbosity shows its logs

from xlnet_tf2.tasks import finetune_flags  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "Directory with xlnet_config.json, spiece.model and a "
                    "backbone checkpoint (converted release, pretraining or fine-tuning run).")
flags.DEFINE_string("input_file", None, "UTF-8 text file, one text per line (empty lines are "
                    "kept and encoded as `<sep> <cls>`).")
flags.DEFINE_string("output_file", None, "Where the features go: a .npz or a .jsonl file (the "
                    "format follows the extension).")
flags.DEFINE_integer("seq_len", None, "Tokens per text, <sep> and <cls> included (default: the "
                     "model_dir's task.json seq_len, else 512).")
flags.DEFINE_integer("batch_size", 16, "Texts per forward pass (the last batch is padded so "
                     "every pass has the same shape).")
finetune_flags.define_inference_flags()
flags.mark_flags_as_required(["model_dir", "input_file", "output_file"])


def main(argv):
    del argv
    import numpy as np
    import tensorflow as tf

    from xlnet_tf2.export.feature_extraction import extract
    from xlnet_tf2.tasks.finetuned_model import load_task_model
    from xlnet_tf2.tasks.text_readers import read_utf8_text
    from xlnet_tf2.tokenizers.sentencepiece_tokenizer import SentencePieceTokenizer

    if not FLAGS.output_file.endswith((".npz", ".jsonl")):
        raise app.UsageError(f"--output_file={FLAGS.output_file!r} must end in .npz or .jsonl.")
    if not tf.io.gfile.exists(FLAGS.input_file):
        raise app.UsageError(f"--input_file={FLAGS.input_file!r} does not exist.")
    texts = read_utf8_text(FLAGS.input_file).splitlines()
    strategy = finetune_flags.inference_strategy()
    with strategy.scope():
        model, spec, spm_model = load_task_model(FLAGS.model_dir, "features")
        seq_len = FLAGS.seq_len or spec.seq_len
        tokenizer = SentencePieceTokenizer.from_file(spm_model, lower=spec.lower)
        features = extract(model, tokenizer, texts, seq_len, FLAGS.batch_size)
    if FLAGS.output_file.endswith(".npz"):
        buffer = io.BytesIO()  # zip needs a seekable file; GFile (gs:// too) gets the bytes
        np.savez(buffer, texts=np.asarray(texts, dtype=str), **features)
        with tf.io.gfile.GFile(FLAGS.output_file, "wb") as f:
            f.write(buffer.getvalue())
    else:
        with tf.io.gfile.GFile(FLAGS.output_file, "w") as f:
            for i, text in enumerate(texts):
                real = features["attention_mask"][i].astype(bool)
                f.write(json.dumps({
                    "index": i, "text": text,
                    "pieces": [tokenizer.id_to_piece(t) for t in features["input_ids"][i][real]],
                    "token_features": features["token_features"][i][real].tolist(),
                    "pooled": features["pooled"][i].tolist()}, ensure_ascii=False) + "\n")
    print(f"{len(texts)} texts, seq_len {seq_len}: features written to {FLAGS.output_file}")


if __name__ == "__main__":
    cli.run(main)
