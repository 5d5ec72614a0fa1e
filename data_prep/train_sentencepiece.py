"""Trains the XLNet SentencePiece model (library: xlnet_tf2.prep.vocabulary).

    python data_prep/train_sentencepiece.py --input='corpus/*.txt' --vocab_size=32000 \
        --model_prefix=out/spiece

Writes PREFIX.model and PREFIX.vocab: a unigram model whose pieces 0..8 are
<unk> <s> </s> <cls> <sep> <pad> <mask> <eod> <eop>. The flags are the settings of
`SentencePieceConfig` (xlnet_tf2/prep/prep_config.py).
"""

# The command is xlnet_tf2/commands/train_sentencepiece.py, installed as the console script
# `xlnet-train-sentencepiece`; this file runs it from a checkout.
from xlnet_tf2.commands.train_sentencepiece import main

if __name__ == "__main__":
    main()
