"""Shared, cached inputs for the data tests: a real English corpus (standard-library
docstrings, assembled at run time), a tiny SentencePiece model trained on it, and one
prepared directory. Built once per test session."""

import os
import tempfile

import numpy as np

from xlnet_tf2 import special_ids
from xlnet_tf2.tools.corpus import build_stdlib_corpus
from xlnet_tf2.data.params import DataParams
from xlnet_tf2.tokenizers.sentencepiece_tokenizer import SentencePieceTokenizer, train_sentencepiece

_CACHE = {}
SMALL = DataParams(seq_len=64, reuse_len=32, num_predict=10, perm_size=32, bi_data=True,
                   num_streams=8, num_passes=2, seed=7)
LOCAL_BEAM = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]


def workdir():
    if "dir" not in _CACHE:
        _CACHE["dir"] = tempfile.mkdtemp(prefix="xlnet_data_test_")
    return _CACHE["dir"]


def corpus_path(max_bytes=250_000):
    key = ("corpus", max_bytes)
    if key not in _CACHE:
        path = os.path.join(workdir(), f"corpus_{max_bytes}.txt")
        build_stdlib_corpus(path, min_bytes=max_bytes // 2, max_bytes=max_bytes)
        _CACHE[key] = path
    return _CACHE[key]


def spm_model():
    if "spm" not in _CACHE:
        _CACHE["spm"] = train_sentencepiece([corpus_path()], vocab_size=600,
                                            model_prefix=os.path.join(workdir(), "sp600"))
    return _CACHE["spm"]


def tokenizer():
    return SentencePieceTokenizer.from_file(spm_model())


def prepared_dir(workers=2):
    """The SMALL configuration prepared with the given number of Beam worker processes."""
    from xlnet_tf2.prep.beam_pipeline import create_tfrecords

    key = ("prepared", workers)
    if key not in _CACHE:
        out = os.path.join(workdir(), f"prepared_w{workers}")
        create_tfrecords(params=SMALL, output_dir=out, spm_model=spm_model(),
                         input_patterns=[corpus_path()],
                         beam_args=["--direct_running_mode=multi_processing",
                                    f"--direct_num_workers={workers}"])
        _CACHE[key] = out
    return _CACHE[key]


def check_mask_semantics(perm_mask, input_ids, target_mapping, ranks, reuse_len):
    """Asserts every rule of XLNET_REFERENCE.md §2 on one example (numpy arrays)."""
    seq_len = input_ids.shape[0]
    is_target = target_mapping.sum(0) > 0
    is_func = (input_ids == special_ids.SEP_ID) | (input_ids == special_ids.CLS_ID)
    assert not np.any(is_target & is_func), "<sep>/<cls> must not be targets"
    half = np.arange(seq_len) >= reuse_len
    for i in range(seq_len):
        for j in range(seq_len):
            blocked = perm_mask[i, j] == 1
            if not half[i] and half[j]:
                expect = True            # reused half never sees the new half
            elif half[i] and not half[j]:
                expect = False           # new half sees the whole reused half
            elif not (is_target[j] or is_func[j]):
                expect = False           # everyone sees non-targets
            elif not (is_target[i] or is_func[i]):
                expect = True            # non-targets see no target and no <sep>/<cls>
            elif is_target[i]:
                expect = not ranks[j] < ranks[i]   # strictly lower rank, never itself
            else:
                expect = not ranks[j] <= ranks[i]  # <sep>/<cls>: up to its own rank
            assert blocked == expect, (i, j, blocked)
