"""Writes an English corpus of Python standard-library docstrings (xlnet_tf2.tools.corpus).

    python data_prep/build_corpus.py --output=runs/corpus/stdlib.txt --min_bytes=1000000

The text is already on every machine with Python, so demos and tests need no download.
"""

import sys

from absl import app, flags

from xlnet_tf2 import cli

cli.quiet_startup()  # no TensorFlow start-up noise unless --verbosity

from xlnet_tf2.tools.corpus import build_stdlib_corpus

flags.DEFINE_string("output", None, "The text file to write, in the pretraining input format.")
flags.DEFINE_integer("min_bytes", 1_000_000, "Fail if the standard library yields less text.")
flags.DEFINE_integer("max_bytes", None, "Stop once this much text is written (default: all).")
FLAGS = flags.FLAGS


def main(argv):
    del argv
    if not FLAGS.output:
        print("build_corpus: error: --output is required.", file=sys.stderr)
        return 1
    try:
        stats = build_stdlib_corpus(FLAGS.output, min_bytes=FLAGS.min_bytes,
                                    max_bytes=FLAGS.max_bytes)
    except ValueError as e:
        print(f"build_corpus: error: {e}", file=sys.stderr)
        return 1
    print(f"Wrote {stats['bytes']} bytes, {stats['documents']} documents, "
          f"{stats['sentences']} sentences to {stats['path']}.")
    return 0


if __name__ == "__main__":
    app.run(main)
