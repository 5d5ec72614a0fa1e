"""Writes an English corpus of Python standard-library docstrings (xlnet_tf2.prep.docstring_corpus).

    python data_prep/build_corpus.py --output=runs/corpus/stdlib.txt --min_bytes=1000000

The text is already on every machine with Python, so demos and tests need no download. The
flags are the settings of `CorpusConfig` (xlnet_tf2/prep/prep_config.py).
"""

# The command is xlnet_tf2/commands/build_corpus.py, installed as the console script
# `xlnet-build-corpus`; this file runs it from a checkout.
from xlnet_tf2.commands.build_corpus import main

if __name__ == "__main__":
    main()
