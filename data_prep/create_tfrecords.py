"""Prepares XLNet pretraining examples with Apache Beam (library: xlnet_tf2.prep.beam_pipeline).

    python data_prep/create_tfrecords.py --input='corpus/*.txt' --spm_model=sp.model \
        --output_dir=data/pretrain --num_streams=64 --bi_data

Flags this script does not know are Beam pipeline options and are passed through unchanged
(--runner, --direct_num_workers, --direct_running_mode, --project, --region, ...). Without
them the pipeline runs on the local DirectRunner with one worker per core.
"""

import logging
import sys

from absl import app, flags

from xlnet_tf2 import cli

cli.quiet_startup()  # no TensorFlow/Beam start-up noise unless --verbosity

import contextlib  # noqa: E402

from xlnet_tf2.prep import beam_options  # noqa: E402

# Importing Beam logs warnings about optional packages (crcmod); not without --verbosity.
with cli.silenced_stderr() if not cli.verbosity_requested() else contextlib.nullcontext():
    from xlnet_tf2.prep.beam_pipeline import PROGRESS_TAG, create_tfrecords  # noqa: E402
from xlnet_tf2.data.params import DataParams, DataPrepError

_D = DataParams()
flags.DEFINE_list("input", [], "Text files or globs (comma-separated) in the original format: "
                  "one sentence per line, a blank line ends a document, <eop> allowed.")
flags.DEFINE_string("tfds_name", None, "A TensorFlow Datasets text dataset to read instead of "
                    "--input (needs internet access or a prepared TFDS data_dir).")
flags.DEFINE_string("tfds_split", "train", "The TFDS split to read, e.g. 'train[:10%]'.")
flags.DEFINE_string("tfds_text_key", "text", "The TFDS feature holding a document's text; "
                    "its lines are the sentences.")
flags.DEFINE_string("spm_model", None, "The SentencePiece model (from "
                    "data_prep/train_sentencepiece.py) used to encode the text.")
flags.DEFINE_string("output_dir", None, "Directory for the TFRecord files and record_info.json.")
flags.DEFINE_boolean("overwrite", False, "Replace prepared data already in --output_dir.")
flags.DEFINE_integer("seq_len", _D.seq_len, "Length L of every example in tokens.")
flags.DEFINE_integer("reuse_len", _D.reuse_len, "Number R of leading tokens of an example that "
                     "the next step of its stream keeps as memory; a stream advances by R "
                     "tokens per example. The original requires seq_len / 2.")
flags.DEFINE_integer("num_predict", _D.num_predict, "Number of target tokens sampled per "
                     "example (about 1/K of seq_len; the paper uses 85 of 512).")
flags.DEFINE_integer("mask_alpha", _D.mask_alpha, "A span of n units is placed in a window of "
                     "n * mask_alpha / mask_beta tokens.")
flags.DEFINE_integer("mask_beta", _D.mask_beta, "See --mask_alpha.")
flags.DEFINE_integer("perm_size", None, "Positions are permuted in blocks of this size "
                     "(defaults to --reuse_len); it must divide reuse_len and seq_len - "
                     "reuse_len.")
flags.DEFINE_boolean("bi_data", _D.bi_data, "Also write every stream read backwards, for "
                     "bidirectional-data pretraining.")
flags.DEFINE_integer("num_streams", _D.num_streams, "Number of parallel token streams. "
                     "Training needs num_streams to be a multiple of the streams it reads per "
                     "step: the global batch, or half of it with --bi_data.")
flags.DEFINE_integer("num_passes", _D.num_passes, "Passes over the corpus; each pass "
                     "re-samples A/B pairs, targets and factorization orders.")
flags.DEFINE_integer("seed", _D.seed, "Seed of every random choice; the same inputs and seed "
                     "give byte-identical output for any number of workers.")
flags.DEFINE_boolean("uncased", _D.uncased, "Lowercase the text before encoding (uncased "
                     "models only).")
flags.DEFINE_enum("span_mode", _D.span_mode, ["original", "word"], "'original' (default): "
                  "the original sampler exactly, spans of n subword pieces (its span-end "
                  "bug); 'word': spans of n whole words (the paper's evident intent).")
flags.DEFINE_boolean("word_cache", _D.word_cache, "Tokenize repeated words from a per-word "
                     "cache (default). Exact: the ids equal line-by-line encoding either way "
                     "(words whose segmentation is not unique, and lines that are not plain "
                     "ASCII, are encoded whole). Faster once words repeat; on a few MB of new "
                     "text --noword_cache is faster.")
flags.DEFINE_float("eval_fraction", 0.0, "Hold out this fraction of the documents (chosen by "
                   "a hash of --seed and the document) into OUTPUT_DIR/eval, which "
                   "pretraining evaluates on by default.")
flags.DEFINE_list("eval_input", [], "Or: text files (globs) prepared into OUTPUT_DIR/eval as "
                  "the held-out split, with the same parameters.")
flags.DEFINE_boolean("skip_bad_lines", False, "Drop and count lines that are not valid UTF-8 "
                     "instead of stopping at the first one.")
FLAGS = flags.FLAGS


def main(argv):
    verbose = cli.verbosity_requested()
    if verbose:
        logging.getLogger().setLevel(logging.INFO)
        logging.getLogger("apache_beam").setLevel(logging.WARNING)
    else:
        beam_options.print_only_tagged_lines(PROGRESS_TAG)
    try:
        beam_args = beam_options.check_pipeline_args(argv[1:])
    except DataPrepError as e:
        print(f"create_tfrecords: error: {e}", file=sys.stderr)
        return 1
    params = DataParams(
        seq_len=FLAGS.seq_len, reuse_len=FLAGS.reuse_len, num_predict=FLAGS.num_predict,
        mask_alpha=FLAGS.mask_alpha, mask_beta=FLAGS.mask_beta,
        perm_size=FLAGS.perm_size or FLAGS.reuse_len, bi_data=FLAGS.bi_data,
        num_streams=FLAGS.num_streams, num_passes=FLAGS.num_passes, seed=FLAGS.seed,
        uncased=FLAGS.uncased, span_mode=FLAGS.span_mode, word_cache=FLAGS.word_cache)
    try:
        # Beam's workers are processes that share this one's stderr: without --verbosity their
        # start-up noise goes nowhere; progress comes through logging (above), errors are
        # raised here and printed below.
        with (cli.silenced_stderr() if not verbose else contextlib.nullcontext()):
            m = create_tfrecords(params=params, output_dir=FLAGS.output_dir,
                                 spm_model=FLAGS.spm_model, input_patterns=FLAGS.input,
                                 tfds_name=FLAGS.tfds_name, tfds_split=FLAGS.tfds_split,
                                 tfds_text_key=FLAGS.tfds_text_key,
                                 skip_bad_lines=FLAGS.skip_bad_lines, overwrite=FLAGS.overwrite,
                                 eval_fraction=FLAGS.eval_fraction, eval_input=FLAGS.eval_input,
                                 beam_args=beam_args)
    except DataPrepError as e:
        print(f"create_tfrecords: error: {e}", file=sys.stderr)
        return 1
    seconds = m["_seconds"]
    print(f"Done in {seconds:.1f}s: {m['documents']} documents, {m['total_tokens']} tokens "
          f"({m['total_tokens'] / seconds:.0f} tokens/s), {m['num_streams']} streams x "
          f"{m['chunks_per_stream']} chunks x {m['directions']} directions x "
          f"{m['num_passes']} passes = {m['num_examples']} examples in {len(m['files'])} "
          f"files; {m['tokens_dropped']} tail tokens dropped; {m['bad_lines_skipped']} bad "
          f"lines skipped. Manifest: {FLAGS.output_dir}/record_info.json")
    if "_eval" in m:
        e = m["_eval"]
        print(f"Held out: {e['documents']} documents, {e['total_tokens']} tokens, "
              f"{e['num_examples']} examples. Manifest: {FLAGS.output_dir}/eval/record_info.json")
    return 0


def _parse_known(argv):
    # Unknown flags are Beam pipeline options; hand them to main untouched.
    return FLAGS(argv, known_only=True)


if __name__ == "__main__":
    app.run(main, flags_parser=_parse_known)
