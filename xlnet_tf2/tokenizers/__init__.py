"""Tokenizers: text -> ids exactly as the original XLNet, offline and in the graph.

  sentencepiece_tokenizer  normalization and SentencePiece encoding (`SentencePieceTokenizer`),
                           the one definition every other path reproduces
  xlnet_tokenizer          `XLNetTokenizer`, the object HuggingFace users expect
  packing                  token ids -> fixed-length model inputs (numpy; the layouts)
  in_graph_tokenizer       the same encoding as TensorFlow ops (tensorflow-text), for serving
  in_graph_packing         the same layouts as TensorFlow ops, ragged ids in
  xlnet_preprocessor       `XLNetPreprocessor`, a Keras layer on the two in-graph modules
  xlnet_multiple_choice_preprocessor, xlnet_question_answering_preprocessor
                           the same for RACE's and SQuAD's layouts

The names are imported on first use: the Python tokenizer (and data preparation, whose Beam
workers are fresh processes) never pays for importing TensorFlow and Keras.
"""

from xlnet_tf2.lazy_names import lazy_names

_LAZY = {
    "SentencePieceTokenizer": "xlnet_tf2.tokenizers.sentencepiece_tokenizer",
    "XLNetTokenizer": "xlnet_tf2.tokenizers.xlnet_tokenizer",
    "XLNetPreprocessor": "xlnet_tf2.tokenizers.xlnet_preprocessor",
    "XLNetMultipleChoicePreprocessor": "xlnet_tf2.tokenizers.xlnet_multiple_choice_preprocessor",
    "XLNetQuestionAnsweringPreprocessor":
        "xlnet_tf2.tokenizers.xlnet_question_answering_preprocessor",
}

__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_names(__name__, _LAZY)
