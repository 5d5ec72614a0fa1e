"""Writes an English corpus of Python standard-library docstrings (xlnet_tf2.prep.docstring_corpus).

    xlnet-build-corpus --output=runs/corpus/stdlib.txt --min_bytes=1000000

(from a checkout: python data_prep/build_corpus.py, same flags.) The text is already on every
machine with Python, so demos and tests need no download. The flags are the settings of
`CorpusConfig` (xlnet_tf2/prep/prep_config.py).
"""

from xlnet_tf2 import cli

cli.quiet_startup()  # no TensorFlow start-up noise unless --verbosity

from xlnet_tf2.config_flags import config_from_flags, define_flags  # noqa: E402
from xlnet_tf2.prep.prep_config import CorpusConfig  # noqa: E402

define_flags(CorpusConfig)


def run(argv):
    del argv
    config = config_from_flags(CorpusConfig)
    from xlnet_tf2.prep.docstring_corpus import build_stdlib_corpus

    stats = build_stdlib_corpus(config.output, min_bytes=config.min_bytes,
                                max_bytes=config.max_bytes)
    print(f"Wrote {stats['bytes']} bytes, {stats['documents']} documents, "
          f"{stats['sentences']} sentences to {stats['path']}.")


def main() -> None:
    """`xlnet-build-corpus` and data_prep/build_corpus.py."""
    cli.run(run, usage=__doc__)
