"""TokenClassifier against HuggingFace's XLNetForTokenClassification: the same random weights,
read from transformers' state dict and written back to it, give logits within 1e-5."""

import numpy as np
import pytest

from xlnet_tf2.conversion import assign_weights
from xlnet_tf2.conversion.head_maps import huggingface_head_map
from xlnet_tf2.conversion.to_huggingface import huggingface_config, huggingface_state
from xlnet_tf2.conversion.weight_maps import huggingface_backbone_map
from xlnet_tf2.models.xlnet_token_classifier import TokenClassifier

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from benchmarks.tools.hf_reference import hf_state_numpy, random_hf_model  # noqa: E402
from fixtures.tf1_checkpoints import tiny_config  # noqa: E402

B, L, LABELS = 3, 10, 5


def _inputs(vocab):
    rng = np.random.default_rng(1)
    mask = np.ones((B, L), np.int32)
    mask[0, :4] = 0
    return {"input_ids": rng.integers(9, vocab, size=(B, L)).astype(np.int32),
            "segment_ids": np.broadcast_to((np.arange(L) >= 7).astype(np.int32), (B, L)).copy(),
            "attention_mask": mask}


def _hf_logits(hf, inputs):
    with torch.no_grad():
        return hf(input_ids=torch.tensor(inputs["input_ids"]).long(),
                  token_type_ids=torch.tensor(inputs["segment_ids"]).long(),
                  attention_mask=torch.tensor(inputs["attention_mask"]).float()).logits.numpy()


def test_token_classifier_matches_transformers_both_ways():
    config = tiny_config()
    hf = random_hf_model(config, seed=3, architecture="XLNetForTokenClassification",
                         num_labels=LABELS)
    ours = TokenClassifier(config, LABELS).build_weights()
    result = assign_weights(huggingface_backbone_map(ours.transformer) + huggingface_head_map(ours),
                            hf_state_numpy(hf), "test")
    assert [n for n in result.unused if not n.startswith("transformer.layer.")] == []
    inputs = _inputs(config.n_token)
    expected = _hf_logits(hf, inputs)
    got = ours(inputs, training=False)["logits"].numpy()
    assert got.shape == (B, L, LABELS)
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0)

    # ours -> transformers: a fresh XLNetForTokenClassification loads our state and agrees.
    tags = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    hf_config = transformers.XLNetConfig(**{k: v for k, v in huggingface_config(ours, tags).items()
                                            if k not in ("architectures", "model_type")})
    assert huggingface_config(ours, tags)["architectures"] == ["XLNetForTokenClassification"]
    assert hf_config.id2label[3] == "B-LOC"
    back = transformers.XLNetForTokenClassification(hf_config).eval()
    state = {k: torch.tensor(v) for k, v in huggingface_state(ours).items()}
    missing, unexpected = back.load_state_dict(state, strict=False)
    assert not unexpected and all("lm_loss" not in m for m in missing) and not missing
    np.testing.assert_allclose(_hf_logits(back, inputs), expected, atol=1e-5, rtol=0)


def test_directories_convert_both_ways(tmp_path):
    """transformers' saved directory -> xlnet-convert's task directory (task.json with the
    id2label tags) -> our save_pretrained(format="huggingface") -> transformers loads it; the
    logits agree with the first model's at every step."""
    from xlnet_tf2.conversion import HeadOptions
    from xlnet_tf2.models import HeadModel
    from xlnet_tf2.models.directories import convert_checkpoint
    from xlnet_tf2.models.saving import read_task_settings

    config = tiny_config()
    tags = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    hf = random_hf_model(config, seed=5, architecture="XLNetForTokenClassification",
                         num_labels=LABELS)
    hf.config.id2label = dict(enumerate(tags))
    hf.config.label2id = {t: i for i, t in enumerate(tags)}
    hf.save_pretrained(str(tmp_path / "hf"))
    report = convert_checkpoint("huggingface", str(tmp_path / "hf"), str(tmp_path / "ours"),
                                head=HeadOptions("token_classification", seq_len=L))
    assert report["unused"] == [] and report["initialized"] == []
    ours = HeadModel.from_pretrained(str(tmp_path / "ours"))
    settings = read_task_settings(str(tmp_path / "ours"))
    assert isinstance(ours, TokenClassifier) and settings["label_list"] == tags
    inputs = _inputs(config.n_token)
    expected = _hf_logits(hf, inputs)
    np.testing.assert_allclose(ours(inputs)["logits"].numpy(), expected, atol=1e-5, rtol=0)
    ours.save_pretrained(str(tmp_path / "back"), format="huggingface", label_list=tags)
    back = transformers.XLNetForTokenClassification.from_pretrained(str(tmp_path / "back"))
    assert back.config.id2label[1] == "B-PER"
    np.testing.assert_allclose(_hf_logits(back.eval(), inputs), expected, atol=1e-5, rtol=0)


def test_a_sequence_classifier_is_refused_as_a_token_classifier(tmp_path):
    from xlnet_tf2.conversion import HeadOptions, WeightMismatchError
    from xlnet_tf2.models.directories import convert_checkpoint

    hf = random_hf_model(tiny_config(), architecture="XLNetForSequenceClassification",
                         num_labels=3)
    hf.save_pretrained(str(tmp_path / "hf"))
    with pytest.raises(WeightMismatchError, match="needs a XLNetForTokenClassification"):
        convert_checkpoint("huggingface", str(tmp_path / "hf"), str(tmp_path / "ours"),
                           head=HeadOptions("token_classification"))
