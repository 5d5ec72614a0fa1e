"""Trains the XLNet SentencePiece model (library: xlnet_tf2.tokenizers.sentencepiece_tokenizer.train_sentencepiece).

    python data_prep/train_sentencepiece.py --input='corpus/*.txt' --vocab_size=32000 \
        --model_prefix=out/spiece

Writes PREFIX.model and PREFIX.vocab: a unigram model whose pieces 0..8 are
<unk> <s> </s> <cls> <sep> <pad> <mask> <eod> <eop>.
"""

import sys

from absl import app, flags

from xlnet_tf2 import cli

cli.quiet_startup()  # no TensorFlow start-up noise unless --verbosity

from xlnet_tf2.prep.text_sources import check_text_files, expand_inputs
from xlnet_tf2.data.params import DataPrepError
from xlnet_tf2.tokenizers.sentencepiece_tokenizer import TokenizerError, train_sentencepiece

flags.DEFINE_list("input", [], "Text files or globs (comma-separated) to learn the pieces from; "
                  "each line is normalized with preprocess_text first.")
flags.DEFINE_integer("vocab_size", 32000, "Number of pieces, the 9 special pieces included.")
flags.DEFINE_string("model_prefix", None, "Output path prefix; PREFIX.model and PREFIX.vocab "
                    "are written.")
flags.DEFINE_boolean("uncased", False, "Lowercase the text first (for an uncased model; the "
                     "released XLNet models are cased).")
flags.DEFINE_float("character_coverage", 0.99995, "Fraction of characters the model covers; "
                   "the rest map to <unk>.")
flags.DEFINE_integer("input_sentence_size", 10_000_000, "At most this many lines, sampled at "
                     "random, are used for training.")
FLAGS = flags.FLAGS


def main(argv):
    del argv
    try:
        if not FLAGS.model_prefix:
            raise DataPrepError("--model_prefix is required.")
        if FLAGS.vocab_size <= 9:
            raise DataPrepError(f"--vocab_size={FLAGS.vocab_size} leaves no room beside the 9 "
                                "special pieces.")
        paths = expand_inputs(FLAGS.input)
        # The same refusal as create_tfrecords.py: one line naming file and line.
        check_text_files(paths, "fix the file or remove it from --input.")
        path = train_sentencepiece(paths, vocab_size=FLAGS.vocab_size,
                                   model_prefix=FLAGS.model_prefix, lower=FLAGS.uncased,
                                   character_coverage=FLAGS.character_coverage,
                                   input_sentence_size=FLAGS.input_sentence_size)
    except (DataPrepError, TokenizerError) as e:
        print(f"train_sentencepiece: error: {e}", file=sys.stderr)
        return 1
    except RuntimeError as e:  # sentencepiece reports e.g. a vocabulary too large for the text
        print(f"train_sentencepiece: error: SentencePiece failed: {e}. Lower --vocab_size "
              "or add text.", file=sys.stderr)
        return 1
    print(f"Wrote {path} ({FLAGS.vocab_size} pieces).")
    return 0


if __name__ == "__main__":
    app.run(main)
