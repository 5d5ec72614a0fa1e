"""Offline data preparation (data_prep/create_tfrecords.py): raw text -> prepared TFRecords.

    text_sources -> encode (SentencePiece, batched) -> streams (documents laid out in parallel
    streams) -> examples (A/B split, span targets and permutation ranks from
    data/objective_sampling) -> records + manifest, driven by the Apache Beam pipeline in
    beam_pipeline.py.

The commands' settings (their flags) are prep_config.py's; vocabulary.py trains the
SentencePiece model of data_prep/train_sentencepiece.py.

The on-disk format it writes (records, manifest, params) and the online input pipeline that
reads it live one floor down, in xlnet_tf2/data. See docs/DATA.md.
"""
