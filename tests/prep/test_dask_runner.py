"""Data preparation on Beam's DaskRunner (xlnet_tf2/prep/dask_runner.py): on a dask.distributed
cluster of two worker processes, the output is byte-identical to the DirectRunner's, bad
input gets the DirectRunner's one-line error, and a failed or killed run leaves no partial
output. Needs the `dask` extra (requirements-test.txt installs it for the suite)."""

import dataclasses
import glob
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("distributed")

import psutil  # noqa: E402 - a dependency of distributed
from apache_beam.options.pipeline_options import PipelineOptions  # noqa: E402

from xlnet_tf2.data.manifest import read_manifest  # noqa: E402
from xlnet_tf2.data.params import DataPrepError  # noqa: E402
from xlnet_tf2.prep.beam_pipeline import _default_beam_options, create_tfrecords  # noqa: E402
from xlnet_tf2.prep.dask_runner import dask_settings, local_cluster  # noqa: E402

from fixtures.battery import snapshot  # noqa: E402
from fixtures.corpora import LOCAL_BEAM, SMALL, corpus_path, spm_model  # noqa: E402
from fixtures.paths import REPO_ROOT  # noqa: E402

EVAL_FRACTION = 0.2
# fixtures.corpora.SMALL as the command's flags.
SMALL_FLAGS = ("--seq_len=64", "--reuse_len=32", "--num_predict=10", "--perm_size=32",
               "--bi_data", "--num_streams=8", "--num_passes=2", "--seed=7")


def test_only_the_dask_options_reach_the_client():
    # Beam 2.70 hands every non-default option to distributed.Client, and its workers then
    # fail with "Server.__init__() got an unexpected keyword argument 'runner'".
    options = PipelineOptions(_default_beam_options([
        "--runner=DaskRunner", "--direct_num_workers=2", "--project=p",
        "--dask_client_address=tcp://127.0.0.1:8786", "--dask_npartitions=3"]))
    assert dask_settings(options) == {"address": "tcp://127.0.0.1:8786", "npartitions": 3}
    assert not any(a.startswith("--direct_") for a in _default_beam_options(
        ["--runner=DaskRunner"]))


@pytest.fixture(scope="module")
def cluster():
    """A dask.distributed cluster of two worker processes (one thread each) on this machine."""
    with local_cluster(workers=2) as running:
        yield running


def _dask(cluster):
    return ["--runner=DaskRunner", f"--dask_client_address={cluster.scheduler_address}"]


def _bad_line_file(directory):
    """20 kB of the corpus with an undecodable line 7."""
    with open(corpus_path(), "rb") as f:
        lines = f.read(20_000).split(b"\n")[:-1]
    lines.insert(6, b"caf\xe9 latin-1 bytes")
    path = os.path.join(directory, "bad.txt")
    with open(path, "wb") as f:
        f.write(b"\n".join(lines) + b"\n")
    return path


def _prepare(out, beam_args, inputs, **kw):
    return create_tfrecords(params=SMALL, output_dir=str(out), spm_model=spm_model(),
                            input_patterns=inputs, eval_fraction=EVAL_FRACTION,
                            skip_bad_lines=True, beam_args=beam_args, **kw)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The DirectRunner's output: the corpus and a file with a bad line (skipped), held-out
    split 0.2. Returns (inputs, output directory)."""
    root = tmp_path_factory.mktemp("direct")
    inputs = [corpus_path(), _bad_line_file(str(root))]
    _prepare(root / "out", LOCAL_BEAM, inputs)
    return inputs, str(root / "out")


def _executed(client):
    return client.run(lambda dask_worker: dask_worker.state.executed_count)


@pytest.mark.slow
def test_output_is_byte_identical_to_the_direct_runner(cluster, reference, tmp_path):
    import distributed

    inputs, direct = reference
    with distributed.Client(cluster) as client:
        before = _executed(client)
        m = _prepare(tmp_path / "out", _dask(cluster), inputs)
        after = _executed(client)
        # glibc's allocator defaults, not the nanny's MALLOC_TRIM_THRESHOLD_ (dask_runner.py).
        trims = client.run(lambda: os.environ.get("MALLOC_TRIM_THRESHOLD_"))
    # Records, both manifests (record_info.json), the model copies: every byte.
    assert snapshot(str(tmp_path / "out")) == snapshot(direct)
    assert m["bad_lines_skipped"] == m["_eval"]["bad_lines_skipped"] == 1
    assert m["num_examples"] > 0 and m["_eval"]["num_examples"] > 0
    assert read_manifest(str(tmp_path / "out")) == read_manifest(direct)
    # The work ran in both worker processes of the cluster.
    assert len(after) == 2 and all(after[w] > before.get(w, 0) for w in after), (before, after)
    assert list(trims.values()) == [None, None]
    assert os.listdir(tmp_path) == ["out"]


@pytest.mark.slow
def test_bad_input_and_a_failed_run_as_on_the_direct_runner(cluster, reference, tmp_path):
    inputs, direct = reference
    bad = _bad_line_file(str(tmp_path))
    messages = []
    for beam_args in (LOCAL_BEAM, _dask(cluster)):
        with pytest.raises(DataPrepError) as e:
            create_tfrecords(params=SMALL, output_dir=str(tmp_path / "new"),
                             spm_model=spm_model(), input_patterns=[bad], beam_args=beam_args)
        messages.append(str(e.value))
    assert messages[0] == messages[1]
    assert messages[0].startswith(f"{bad}:7: line is not valid UTF-8 (")
    assert messages[0].endswith("; fix the file or pass --skip_bad_lines.")
    # A run that fails inside the cluster after the tokenizing (too little text for 500
    # streams, found by the layout), replacing good data: the good data stays as it was.
    kept = tmp_path / "kept"
    shutil.copytree(direct, kept)
    before = snapshot(str(kept))
    with pytest.raises(DataPrepError, match=r"Too little text: the inputs give \d+ tokens"):
        create_tfrecords(params=dataclasses.replace(SMALL, num_streams=500),
                         output_dir=str(kept), spm_model=spm_model(), input_patterns=[bad],
                         skip_bad_lines=True, overwrite=True, beam_args=_dask(cluster))
    assert snapshot(str(kept)) == before
    assert sorted(os.listdir(tmp_path)) == ["bad.txt", "kept"]


@pytest.mark.slow
def test_killed_run_leaves_no_output_and_no_workers(cluster, reference, tmp_path, capfd):
    inputs, direct = reference
    out = tmp_path / "out"
    # The command as a user runs it, on a local cluster of its own (no address).
    command = [sys.executable, os.path.join(REPO_ROOT, "data_prep/create_tfrecords.py"),
               f"--input={','.join(inputs)}", f"--spm_model={spm_model()}",
               f"--output_dir={out}", "--skip_bad_lines", f"--eval_fraction={EVAL_FRACTION}",
               "--runner=DaskRunner", *SMALL_FLAGS]
    proc = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    workers = []
    deadline = time.time() + 240
    # SIGKILL once the cluster's workers have written a token file (the pipeline is running).
    while proc.poll() is None and time.time() < deadline:
        if glob.glob(str(tmp_path / ".out.prep-*" / ".prep" / "tokens" / "*.npy")):
            workers = psutil.Process(proc.pid).children(recursive=True)
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.01)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, stderr.decode()[-3000:]
    assert len(workers) >= 2  # the cluster's worker processes (and multiprocessing's tracker)
    # No output directory, only the staging leftover; the cluster's workers end with it.
    assert not out.exists()
    assert [n.startswith(".out.prep-") for n in os.listdir(tmp_path)] == [True]
    _, alive = psutil.wait_procs(workers, timeout=30)
    assert not alive, alive
    # The next run reports and removes the leftover, and prepares the same bytes.
    _prepare(out, _dask(cluster), inputs)
    assert "an incomplete preparation left by a killed run; removing it." in \
        capfd.readouterr().err
    assert os.listdir(tmp_path) == ["out"]
    assert snapshot(str(out)) == snapshot(direct)
