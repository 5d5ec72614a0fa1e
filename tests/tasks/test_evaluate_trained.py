"""Evaluation without training, the one way for every fine-tuning command (--nodo_train:
tasks/finetuning.py's run_finetuning -> evaluate_trained): a trained model_dir on any
evaluation file, laid out as its task.json says, scored as the training's evaluation scores;
a tag the tagger does not know is scored as missed (conlleval's rule) with one warning line.

The models are tiny and untrained (random heads): what is checked is that the numbers are
the ones an independent path gives (the keras-hub-style classes' in-graph preprocessors)."""

import json

import numpy as np
import pytest

import xlnet_tf2
from fixtures.task_files import train_tiny_spm
from fixtures.tf1_checkpoints import tiny_config
from xlnet_tf2.config_flags import RunConfigError
from xlnet_tf2.tasks.classification import ClassificationTask
from xlnet_tf2.tasks.entities import entity_scores
from xlnet_tf2.tasks.finetune_config import ClassificationConfig, RaceConfig, SquadConfig
from xlnet_tf2.tasks.finetuning import evaluate_trained, run_finetuning
from xlnet_tf2.tasks.race import RaceTask
from xlnet_tf2.tasks.squad import SquadTask
from xlnet_tf2.tasks.token_classification import (UNSEEN_TAG, Sentence, TokenClassificationTask,
                                                  build_features, eval_tag_ids, word_tags)
from xlnet_tf2.tasks.token_classification_config import TokenClassificationConfig

TAGS = ["O", "B-PER", "I-PER"]
# 3 sentences; "B-CLASS" and "I-CLASS" are tags the model never saw (2 words, 2 entities).
CONLL = """Anna B-PER
Smith I-PER
wrote O
Python B-CLASS

The O
list I-CLASS
sorts O

Peter B-PER
spoke O
"""


@pytest.fixture(scope="module")
def spm(tmp_path_factory):
    return train_tiny_spm(str(tmp_path_factory.mktemp("spm")))


def test_unseen_tags_are_scored_as_missed_with_one_warning(capsys):
    """The scoring alone, on logits that predict every known tag right: the unseen tags'
    words get a prediction (read at their first piece), never their gold tag, so their
    entities count as missed: recall 2/4, precision 1."""
    sentences = [Sentence(("Anna", "Smith", "wrote", "Python"), ("B-PER", "I-PER", "O",
                                                                  "B-CLASS"), 1),
                 Sentence(("The", "list", "sorts"), ("O", "I-CLASS", "O"), 6),
                 Sentence(("Peter", "spoke"), ("B-PER", "O"), 10)]
    ids = eval_tag_ids(sentences, TAGS, "dev.txt")
    assert ids == [[1, 2, 0, UNSEEN_TAG], [0, UNSEEN_TAG, 0], [1, 0]]
    warning = capsys.readouterr().err.strip().splitlines()
    assert warning == ["warning: dev.txt: tags ['B-CLASS', 'I-CLASS'] (2 words) are not among "
                       "the model's tags ['O', 'B-PER', 'I-PER']: scored as missed, as "
                       "conlleval scores them."]

    class Tokenizer:  # one piece per word
        def encode_ids(self, word):
            return [100 + len(word)]

    features = build_features(sentences, Tokenizer(), 16, ids)
    labels = features["label"]
    assert (labels == UNSEEN_TAG).sum() == 2
    logits = np.zeros(labels.shape + (3,), np.float32)
    logits[..., 0] = 1.0  # "O" wherever the gold tag is unknown
    for tag in range(3):
        logits[labels == tag, tag] = 5.0
    predicted = word_tags(logits, features, TAGS, [len(s.words) for s in sentences])
    assert predicted == [["B-PER", "I-PER", "O", "O"], ["O", "O", "O"], ["B-PER", "O"]]
    scores = entity_scores([list(s.tags) for s in sentences], predicted)
    assert (scores["precision"], scores["recall"]) == (1.0, 0.5)


def test_the_tagger_evaluates_a_trained_model_dir_on_any_file(spm, tmp_path, capsys):
    model = xlnet_tf2.TokenClassifier(tiny_config(n_token=500), len(TAGS)).build_weights()
    model.save_pretrained(str(tmp_path / "run"), spm, label_list=TAGS, seq_len=16)
    (tmp_path / "test.txt").write_text(CONLL)
    config = TokenClassificationConfig.flat(model_dir=str(tmp_path / "run"), do_train=False,
                                            eval_file=str(tmp_path / "test.txt"),
                                            feature_cache_dir="off")
    result = run_finetuning(TokenClassificationTask, config)  # no --train_file needed
    assert (result.kind, result.checkpoint) == ("token_classification", "best")
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning:" in line]
    assert len(warnings) == 1 and "['B-CLASS', 'I-CLASS'] (2 words)" in warnings[0]
    # The same numbers from the keras-hub-style tagger's in-graph words -> tags.
    tagger = xlnet_tf2.XLNetTokenClassifier.from_preset(str(tmp_path / "run"))
    gold = [[line.split()[1] for line in block.splitlines()] for block in CONLL.split("\n\n")]
    words = [[line.split()[0] for line in block.splitlines()] for block in CONLL.split("\n\n")]
    expected = entity_scores(gold, tagger.predict_tags(words))
    assert result.metrics == pytest.approx(expected, abs=1e-12)
    assert json.loads(result.summary())["metrics"] == result.metrics
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == sorted(
        ["checkpoint", "ckpt-0.data-00000-of-00001", "ckpt-0.index", "spiece.model",
         "task.json", "xlnet_config.json"])  # the model_dir is only read


@pytest.mark.slow  # the keras-hub classifier's predict beside it: 15-25 s
def test_the_classifier_evaluates_a_trained_model_dir(spm, tmp_path):
    model = xlnet_tf2.SequenceClassifier(tiny_config(n_token=500), 2).build_weights()
    model.save_pretrained(str(tmp_path / "run"), spm, label_list=["neg", "pos"], seq_len=32)
    texts = ["Sort the list in place.", "Create a new event loop.", "Return the items.",
             "Run the coroutine until it completes.", "Parse an email message."]
    labels = ["neg", "pos", "neg", "pos", "pos"]
    (tmp_path / "test.tsv").write_text(
        "sentence\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in zip(texts, labels)))
    config = ClassificationConfig.flat(model_dir=str(tmp_path / "run"), do_train=False,
                                       eval_file=str(tmp_path / "test.tsv"),
                                       text_a_column="sentence", label_column="label",
                                       feature_cache_dir="off")
    result = evaluate_trained(ClassificationTask, config)
    classifier = xlnet_tf2.XLNetClassifier.from_preset(str(tmp_path / "run"))
    predicted = classifier.predict(texts, verbose=0).argmax(-1)
    gold = np.asarray([["neg", "pos"].index(y) for y in labels])
    assert result.metrics["accuracy"] == pytest.approx(float(np.mean(predicted == gold)))
    # A model of another kind, and no evaluation data: one line each.
    with pytest.raises(RunConfigError, match=r"task.json says 'classification'; this command "
                       r"evaluates race models"):
        evaluate_trained(RaceTask, RaceConfig.flat(model_dir=str(tmp_path / "run"),
                                                   do_train=False, eval_path="x"))
    with pytest.raises(RunConfigError, match=r"^--nodo_train evaluates a trained model and "
                       r"needs evaluation data: give --eval_file"):
        evaluate_trained(ClassificationTask, ClassificationConfig.flat(
            model_dir=str(tmp_path / "run"), do_train=False))


@pytest.mark.slow  # 4 options x 48 tokens through the keras-hub chooser too: 20-35 s
def test_race_evaluates_a_trained_model_dir(spm, tmp_path):
    model = xlnet_tf2.MultipleChoiceModel(tiny_config(n_token=500), 4).build_weights()
    model.save_pretrained(str(tmp_path / "run"), spm, seq_len=48)
    passage = {"article": "The list is sorted in place by its method.",
               "questions": ["What is sorted?", "Where is it sorted?"],
               "options": [["The list", "A loop", "A file", "Nothing"],
                           ["In place", "On disk", "In a copy", "Nowhere"]],
               "answers": ["A", "A"]}
    (tmp_path / "test.json").write_text(json.dumps(passage))
    config = RaceConfig.flat(model_dir=str(tmp_path / "run"), do_train=False,
                             eval_path=str(tmp_path / "test.json"), max_qa_length=16,
                             seq_len=48, feature_cache_dir="off")
    result = evaluate_trained(RaceTask, config)
    chooser = xlnet_tf2.XLNetMultipleChoice.from_preset(str(tmp_path / "run"))
    logits = chooser.predict({"article": [passage["article"]] * 2,
                              "question": passage["questions"],
                              "options": passage["options"]}, verbose=0)
    assert result.metrics["accuracy"] == pytest.approx(float(np.mean(logits.argmax(-1) == 0)))


def test_every_fine_tuning_command_takes_nodo_train():
    """One way for all: the shared setting, and each task's training needs its training data
    only when it trains."""
    for cls in (ClassificationConfig, RaceConfig, SquadConfig, TokenClassificationConfig):
        config = cls.flat(model_dir="m", do_train=False)  # no training data: fine
        assert config.do_train is False and config.checkpoint == "best"
