"""Tokenizers HuggingFace and keras-hub users expect: `XLNetTokenizer` (Python, batch
encoding and decoding) and `XLNetPreprocessor` (a Keras layer on the in-graph SentencePiece op,
for tf.data and exported models). Both give exactly the ids of xlnet_tf2.tokenization."""

from xlnet_tf2.tokenizers.xlnet_preprocessor import XLNetPreprocessor
from xlnet_tf2.tokenizers.xlnet_tokenizer import XLNetTokenizer

__all__ = ["XLNetPreprocessor", "XLNetTokenizer"]
