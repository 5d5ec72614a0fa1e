"""The tokenizing step of the Beam pipeline loads the SentencePiece model from the run's copy
(beam_pipeline.ModelCopy) and the writing step carries only the start-piece table: small
pickles, and a clear line when the copy cannot be read or changed during the run."""

import shutil

import pytest
from apache_beam.internal import pickler

from xlnet_tf2.data.params import DataParams, DataPrepError
from xlnet_tf2.prep.beam_pipeline import SPLITS, ModelCopy, _ReadAndTokenize, _WriteStream
from xlnet_tf2.data.objective_sampling import start_piece_table
from xlnet_tf2.tokenizers.sentencepiece_tokenizer import model_checksum

from fixtures.corpora import spm_model, tokenizer


def _copy(tmp_path):
    path = str(tmp_path / "spiece.model")
    shutil.copyfile(spm_model(), path)
    with open(path, "rb") as f:
        return ModelCopy(path, model_checksum(f.read()))


def test_the_copy_loads_as_the_model(tmp_path):
    loaded = _copy(tmp_path).load(lower=True)
    assert loaded.checksum == tokenizer().checksum and loaded.lower
    assert loaded.encode_ids("Hello world.") == tokenizer().encode_ids("hello world.")


def test_steps_pickle_without_the_model(tmp_path):
    model = _copy(tmp_path)
    size = len(tokenizer().model_proto)
    steps = [_ReadAndTokenize(model, uncased=False, word_cache=True, token_dir=str(tmp_path),
                              progress={}, skip_bad_lines=False, eval_fraction=0.1, seed=1,
                              splits=SPLITS),
             _WriteStream(start_piece_table(tokenizer()), DataParams(),
                          {split: str(tmp_path / split) for split in SPLITS}, {})]
    for step in steps:
        # Beam pickles every step into the pipeline and unpickles it in each worker.
        assert len(pickler.dumps(step)) < min(4096, size // 10)


def test_a_missing_copy_is_named(tmp_path):
    model = _copy(tmp_path)
    (tmp_path / "spiece.model").unlink()
    with pytest.raises(DataPrepError, match=r"spiece.model: cannot read the run's copy of "
                                            r"the SentencePiece model .*reachable"):
        model.load()


def test_a_changed_copy_is_refused(tmp_path):
    model = _copy(tmp_path)
    with open(tmp_path / "spiece.model", "ab") as f:
        f.write(b"\0")
    with pytest.raises(DataPrepError, match="changed while it ran"):
        model.load()
