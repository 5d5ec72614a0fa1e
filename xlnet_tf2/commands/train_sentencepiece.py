"""Trains the XLNet SentencePiece model (library: xlnet_tf2.prep.vocabulary).

    xlnet-train-sentencepiece --input='corpus/*.txt' --vocab_size=32000 \\
        --model_prefix=out/spiece

(from a checkout: python data_prep/train_sentencepiece.py, same flags.) Writes PREFIX.model
and PREFIX.vocab: a unigram model whose pieces 0..8 are
<unk> <s> </s> <cls> <sep> <pad> <mask> <eod> <eop>. The flags are the settings of
`SentencePieceConfig` (xlnet_tf2/prep/prep_config.py).
"""

from xlnet_tf2 import cli

cli.quiet_startup()  # no TensorFlow start-up noise unless --verbosity

from xlnet_tf2.config_flags import config_from_flags, define_flags  # noqa: E402
from xlnet_tf2.prep.prep_config import SentencePieceConfig  # noqa: E402

define_flags(SentencePieceConfig)


def run(argv):
    del argv
    config = config_from_flags(SentencePieceConfig)
    from xlnet_tf2.prep.vocabulary import train_vocabulary

    path = train_vocabulary(config)
    print(f"Wrote {path} ({config.vocab_size} pieces).")


def main() -> None:
    """`xlnet-train-sentencepiece` and data_prep/train_sentencepiece.py."""
    cli.run(run, usage=__doc__)
