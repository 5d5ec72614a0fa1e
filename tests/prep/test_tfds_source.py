"""Data preparation from a TensorFlow Datasets dataset (`--tfds_name`): a small dataset built
from text files into a temporary data_dir (fixtures/tfds_datasets.py, no network) is read,
sliced and prepared, and gives exactly what the same documents give from the text file."""

import json
import os
import subprocess
import sys

import pytest

from xlnet_tf2.data.params import DataParams, DataPrepError
from xlnet_tf2.prep import text_sources
from xlnet_tf2.prep.beam_pipeline import create_tfrecords

from fixtures import tfds_datasets
from fixtures.corpora import LOCAL_BEAM, spm_model
from fixtures.paths import REPO_ROOT as REPO
from fixtures.tfds_datasets import DOCUMENTS, TOPICS

TINY = DataParams(seq_len=32, reuse_len=16, num_predict=5, perm_size=16, bi_data=False,
                  num_streams=2, num_passes=1, seed=3)


@pytest.fixture(scope="module")
def data():
    files = tfds_datasets.prepared()
    # The file must be one range (text_sources.file_ranges) for its documents to be keyed
    # (0, 0), (0, 1), ... like the dataset's records: a larger file keys them per range.
    assert os.path.getsize(files["train_text"]) < text_sources.MIN_RANGE_BYTES
    return files


def _file_documents(path, index=0):
    return [doc for part in text_sources.source_parts(("file", index, path))
            for doc in text_sources.read_source(part, False)]


def _tfds_documents(sources):
    return [doc for source in sources for doc in text_sources.read_source(source, False)]


def test_slices_cover_the_split_and_read_the_file_documents(data):
    expected = _file_documents(data["train_text"])
    assert len(expected) >= 16  # more documents than slices: some slices hold several
    for slices in (16, 3, 1):
        sources = text_sources.tfds_sources(DOCUMENTS, "train", "text", slices,
                                            data["data_dir"])
        assert len(sources) == slices
        # Contiguous ranges of record numbers that cover the split, each keyed from its start.
        bounds = [tuple(map(int, s[3][len("train["):-1].split(":"))) for s in sources]
        assert bounds[0][0] == 0 and bounds[-1][1] == len(expected)
        assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
        assert [s[6:] for s in sources] == [(0, b[0]) for b in bounds]
        # The same keys and lines as the text file: the slicing changes nothing.
        assert _tfds_documents(sources) == expected


def test_split_expressions_select_and_key_the_records(data):
    train = [lines for _, lines in _file_documents(data["train_text"])]
    validation = [lines for _, lines in _file_documents(data["validation_text"])]
    half = len(train) // 2
    sources = text_sources.tfds_sources(DOCUMENTS, "train[:50%]+validation", "text", 8,
                                        data["data_dir"])
    documents = _tfds_documents(sources)
    assert [lines for _, lines in documents] == train[:half] + validation
    # Each part of the expression keys its records by the first slice reading it.
    first_validation = next(s[1] for s in sources if s[3].startswith("validation["))
    assert [key for key, _ in documents] == (
        [(0, i) for i in range(half)] + [(first_validation, i) for i in range(len(validation))])
    tail = _tfds_documents(text_sources.tfds_sources(DOCUMENTS, "train[-3:]", "text", 16,
                                                     data["data_dir"]))
    assert tail == [((0, i), train[i]) for i in range(len(train) - 3, len(train))]


def _prepare(tmp_path, name, **inputs):
    return create_tfrecords(params=TINY, output_dir=str(tmp_path / name), spm_model=spm_model(),
                            eval_fraction=0.2, beam_args=LOCAL_BEAM, **inputs)


def _output_files(directory):
    """{relative path: bytes} of a prepared directory, the manifests without their "inputs"
    (which name the text file or the dataset's slices)."""
    found = {}
    for root, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                content = f.read()
            if name == "record_info.json":
                manifest = json.loads(content)
                found[(os.path.relpath(path, directory), "inputs")] = manifest.pop("inputs")
                content = json.dumps(manifest, sort_keys=True).encode()
            found[os.path.relpath(path, directory)] = content
    return found


def _inputs_of(files):
    return {k[0]: files.pop(k) for k in [k for k in files if isinstance(k, tuple)]}


def test_create_tfrecords_from_tfds_equals_the_text_file(data, tmp_path):
    from_file = _prepare(tmp_path, "file", input_patterns=[data["train_text"]])
    from_tfds = _prepare(tmp_path, "tfds", tfds_name=DOCUMENTS, tfds_split="train",
                         tfds_text_key="text", tfds_data_dir=data["data_dir"])
    assert from_tfds["documents"] == from_file["documents"] > 10
    assert from_tfds["_eval"]["documents"] == from_file["_eval"]["documents"] > 0
    file_files, tfds_files = _output_files(tmp_path / "file"), _output_files(tmp_path / "tfds")
    file_inputs, tfds_inputs = _inputs_of(file_files), _inputs_of(tfds_files)
    # Every record file (train and held-out), byte for byte, and the rest of the manifests.
    assert sorted(tfds_files) == sorted(file_files)
    assert sum(name.endswith(".tfrecord") for name in tfds_files) == 4
    for name in file_files:
        assert tfds_files[name] == file_files[name], name
    assert file_inputs["record_info.json"] == [["file", 0, data["train_text"]]]
    first_slice = f"train[0:{from_file['documents'] // text_sources.TFDS_SLICES}]"
    assert tfds_inputs["record_info.json"][0] == [
        "tfds", 0, DOCUMENTS, first_slice, "text", data["data_dir"], 0, 0]
    assert len(tfds_inputs["record_info.json"]) == text_sources.TFDS_SLICES


def _error(**kw):
    with pytest.raises(DataPrepError) as e:
        text_sources.tfds_sources(**kw)
    message = str(e.value)
    assert "\n" not in message, message  # one line, never TFDS's list of every dataset
    return message


def test_bad_tfds_inputs_name_the_flag(data, tmp_path):
    good = dict(name=DOCUMENTS, split="train", text_key="text", num_slices=4,
                data_dir=data["data_dir"])
    message = _error(**dict(good, name="xlnet_no_such_dataset"))
    assert message.startswith("--tfds_name=xlnet_no_such_dataset: no such dataset in "
                              f"--tfds_data_dir={data['data_dir']}")
    assert "DatasetNotFoundError" in message and "`tfds build`" in message
    # A registered builder (this process imported it) whose data is not there: no download.
    empty = str(tmp_path / "empty_data_dir")
    message = _error(**dict(good, data_dir=empty))
    assert message.startswith(f"--tfds_name={DOCUMENTS} is not prepared in "
                              f"--tfds_data_dir={empty}; data preparation does not download")
    assert not os.path.exists(os.path.join(empty, DOCUMENTS))
    assert _error(**dict(good, split="test")).startswith(
        f"--tfds_split='test' is not a valid split of {DOCUMENTS} (ValueError: Unknown split")
    assert "['train', 'validation']" in _error(**dict(good, split="train[one:two]"))
    assert _error(**dict(good, split="train[5:5]")) == (
        f"--tfds_split='train[5:5]' of {DOCUMENTS} holds no records; choose a split with "
        "documents.")
    assert _error(**dict(good, text_key="body")) == (
        f"--tfds_text_key=body: {DOCUMENTS} has no such feature (it has ['text']); pass the "
        "feature holding the text.")
    assert _error(**dict(good, name=TOPICS, text_key="topic")).startswith(
        f"--tfds_text_key=topic: that feature of {TOPICS} is ClassLabel of int64 [], not one "
        "text per record")
    # The same checks stop create_tfrecords before any work.
    with pytest.raises(DataPrepError, match="^--tfds_split='test' is not a valid split"):
        _prepare(tmp_path, "out", tfds_name=DOCUMENTS, tfds_split="test",
                 tfds_data_dir=data["data_dir"])
    assert not os.path.exists(tmp_path / "out")


def test_record_lines_are_split_like_a_text_file():
    text = "First line.\r\n  \nSecond\u2028still second.\n\t\nThird.\n"
    assert text_sources.tfds_document_lines(text) == [
        "First line.\r", "Second\u2028still second.", "Third."]


def _command(*flags):
    return subprocess.run(
        [sys.executable, os.path.join(REPO, "data_prep/create_tfrecords.py"), *flags],
        capture_output=True, text=True, cwd=REPO)


@pytest.mark.slow
def test_command_reads_a_dataset_it_has_no_class_for(data, tmp_path):
    # The command never imports fixtures/tfds_datasets.py: TFDS finds the prepared dataset
    # in --tfds_data_dir from its dataset_info.json, in the launcher and in each of the two
    # Beam worker processes.
    flags = [f"--spm_model={spm_model()}", "--seq_len=32", "--reuse_len=16", "--num_predict=5",
             "--perm_size=16", "--nobi_data", "--num_streams=2", "--num_passes=1", "--seed=3",
             "--eval_fraction=0.2"]
    run = _command(f"--tfds_name={DOCUMENTS}:1.0.0", "--tfds_split=train",
                   f"--tfds_data_dir={data['data_dir']}", f"--output_dir={tmp_path}/tfds",
                   "--direct_num_workers=2", "--direct_running_mode=multi_processing", *flags)
    assert run.returncode == 0, run.stderr[-3000:]
    _prepare(tmp_path, "file", input_patterns=[data["train_text"]])
    file_files, tfds_files = _output_files(tmp_path / "file"), _output_files(tmp_path / "tfds")
    _inputs_of(file_files)
    assert _inputs_of(tfds_files)["record_info.json"][0][2] == f"{DOCUMENTS}:1.0.0"
    assert sorted(tfds_files) == sorted(file_files)
    for name in file_files:
        assert tfds_files[name] == file_files[name], name
    # A dataset that is not there: one line naming the flags, exit status 2.
    run = _command("--tfds_name=xlnet_no_such_dataset", f"--tfds_data_dir={data['data_dir']}",
                   f"--output_dir={tmp_path}/missing", *flags)
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [
        "create_tfrecords.py: error: --tfds_name=xlnet_no_such_dataset: no such dataset in "
        f"--tfds_data_dir={data['data_dir']} (DatasetNotFoundError: Dataset "
        "xlnet_no_such_dataset not found.); prepare it with `tfds build` (or "
        "download_and_prepare) and pass its data directory as --tfds_data_dir."]
