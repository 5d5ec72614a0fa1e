"""--online_permutation: a new factorization order for every example in every pass over the
data, deterministic from --seed and the step, and exact when a killed run resumes."""

import numpy as np
import pytest

from xlnet_tf2.data.pretrain_dataset import build_pretrain_dataset, load_schedule

from fixtures.pretrain_runs import TRAIN_FLAGS as PAPER_FLAGS
from fixtures.pretrain_runs import kill_after_checkpoint as _kill_after_checkpoint
from fixtures.pretrain_runs import run_python as _run
from fixtures.pretrain_runs import steps_by_number as _losses

pytestmark = pytest.mark.slow  # data_dir is prepared by a command in a subprocess

DATA = dict(seq_len=32, reuse_len=16, num_predict=5, bi_data=True, vocab_size=300)
# The paper's run-time settings (dropout 0.1, memory on, bi_data), several steps per loop.
TRAIN_FLAGS = PAPER_FLAGS + ["--steps_per_loop=2", "--seed=7"]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """A corpus small enough that a pass over the data takes a handful of steps."""
    d = tmp_path_factory.mktemp("online")
    _run(["data_prep/build_corpus.py", f"--output={d}/big.txt", "--min_bytes=20000",
          "--max_bytes=40000"])
    with open(d / "big.txt", encoding="utf-8") as f:
        text = f.read()
    with open(d / "corpus.txt", "w", encoding="utf-8") as f:  # about 10 steps per cycle
        f.write(text[:1500].rsplit("\n", 1)[0] + "\n")
    _run(["data_prep/train_sentencepiece.py", f"--input={d}/big.txt",
          f"--vocab_size={DATA['vocab_size']}", f"--model_prefix={d}/sp"])
    _run(["data_prep/create_tfrecords.py", f"--input={d}/corpus.txt", f"--spm_model={d}/sp.model",
          f"--output_dir={d}/data", f"--seq_len={DATA['seq_len']}",
          f"--reuse_len={DATA['reuse_len']}", f"--num_predict={DATA['num_predict']}",
          "--num_streams=2", "--bi_data"])
    return str(d / "data")


def _orders(batch):
    """int [b, L]: the factorization rank of each position as the pipeline ships it."""
    if "perm_rank" in batch:
        return batch["perm_rank"]
    return batch["perm_mask"]  # dense masks: equal iff the orders are equal


def _cycle_steps(data_dir):
    return load_schedule(data_dir, global_batch_size=4, **DATA).steps_per_cycle


def _batches(data_dir, num_steps, start_step=0, **kw):
    ds = build_pretrain_dataset(data_dir, global_batch_size=4, start_step=start_step,
                                **DATA, **kw)
    return [{k: v.numpy() for k, v in x.items()} for x in ds.take(num_steps)]


def test_order_is_redrawn_every_pass_and_reproducible_from_any_step(data_dir):
    cycle = _cycle_steps(data_dir)
    assert 2 <= cycle <= 30, cycle
    online = _batches(data_dir, cycle + 2, online_permutation=True, seed=7)
    offline = _batches(data_dir, cycle + 2)
    for step in (0, 1):
        first, second = online[step], online[step + cycle]
        # The same text in the same slots, pass after pass ...
        for name in ("input_ids", "stream_id", "chunk_index", "direction"):
            np.testing.assert_array_equal(first[name], second[name])
        # ... a new order for every row in the next pass; the stored order never changes.
        for n in range(4):
            assert not np.array_equal(_orders(first)[n], _orders(second)[n]), (step, n)
        np.testing.assert_array_equal(_orders(offline[step]), _orders(offline[step + cycle]))
        assert not np.array_equal(_orders(first), _orders(offline[step]))
    # Resuming mid-pass gives the orders of the uninterrupted pipeline; another seed does not.
    resumed = _batches(data_dir, 2, start_step=cycle, online_permutation=True, seed=7)
    for got, want in zip(resumed, online[cycle:]):
        for name, value in want.items():
            np.testing.assert_array_equal(got[name], value, err_msg=name)
    other = _batches(data_dir, 1, start_step=cycle, online_permutation=True, seed=8)[0]
    assert not np.array_equal(_orders(other), _orders(online[cycle]))


@pytest.mark.slow
def test_cli_online_permutation_resumes_exactly_across_passes(data_dir, tmp_path):
    """Killed after a checkpoint in the first pass, the resumed run reproduces the losses of an
    uninterrupted one in the second pass too; without the flag, the first loss differs."""
    cycle = _cycle_steps(data_dir)
    steps = cycle + 4
    common = [f"--data_dir={data_dir}", f"--train_steps={steps}", "--save_steps=2"] + TRAIN_FLAGS
    reference = tmp_path / "reference"
    _run(["experiments/run_pretrain.py", f"--model_dir={reference}", "--online_permutation"]
         + common)
    # Step 1's loss is taken before any update: it shows the order the pipeline used.
    stored = tmp_path / "stored"
    _run(["experiments/run_pretrain.py", f"--model_dir={stored}", "--train_steps=1"]
         + [f for f in common if not f.startswith("--train_steps")])

    killed = tmp_path / "killed"
    args = ["experiments/run_pretrain.py", f"--model_dir={killed}",
            "--online_permutation"] + common
    _kill_after_checkpoint(args, killed / "ckpt-2.index")
    _run(args)

    ref, got, plain = _losses(reference), _losses(killed), _losses(stored)
    assert sorted(got) == sorted(ref) == list(range(1, steps + 1))
    for step in ref:
        assert got[step]["loss"] == ref[step]["loss"], step
        assert got[step]["stream_id"] == ref[step]["stream_id"], step
    # The same text in another order: the stored orders give another first loss.
    assert plain[1]["stream_id"] == ref[1]["stream_id"]
    assert plain[1]["loss"] != ref[1]["loss"]
