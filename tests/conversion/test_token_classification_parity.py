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
