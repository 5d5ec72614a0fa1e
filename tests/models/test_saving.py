"""Our checkpoint format read back: the one notion of a damaged checkpoint (models/saving.py's
checkpoint_damage) tells files that cannot be read (cut short, overwritten, a file gone) from
files that hold another model's values, for loading and for a training run's fallback alike."""

import os
import shutil

import pytest

from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.models import XLNetLMHeadModel, saving
from xlnet_tf2.run_dir import ModelFilesError


def _model(**overrides):
    model = XLNetLMHeadModel(XLNetConfig.preset("tiny", n_token=97, **overrides))
    model.build()
    return model


def _truncate(prefix):
    path = prefix + ".data-00000-of-00001"
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[:100])


def _remove_data(prefix):
    os.remove(prefix + ".data-00000-of-00001")


def _garbage_index(prefix):
    with open(prefix + ".index", "wb") as f:
        f.write(b"garbage")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("lm"))
    saving.save_pretrained(_model(), directory)
    return directory


@pytest.mark.parametrize("fault", [_truncate, _remove_data, _garbage_index],
                         ids=["truncated", "data-file-removed", "index-overwritten"])
def test_unreadable_files_are_damaged(saved, tmp_path, fault):
    directory = str(tmp_path / "copy")
    shutil.copytree(saved, directory)
    fault(os.path.join(directory, saving.CHECKPOINT_PREFIX))
    with pytest.raises(ModelFilesError, match="is damaged") as caught:
        saving.restore_weights(_model(), directory)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("overrides", [dict(n_layer=3), dict(d_inner=48)],
                         ids=["more-layers", "other-width"])
def test_another_models_values_are_not_damage(saved, overrides):
    with pytest.raises(ModelFilesError, match="does not hold this model's weights") as caught:
        saving.restore_weights(_model(**overrides), saved)
    assert "damaged" not in str(caught.value)
