"""Pretraining data: offline preparation (Apache Beam) and the tf.data input pipeline.

Offline: inputs -> streams -> span_sampling / examples / permutation -> records + manifest
(driven by beam_pipeline.create_tfrecords). Online: pretrain_dataset.build_pretrain_dataset
reads the records, checks the manifest and builds the masks (masks.py). See docs/DATA.md.
"""
