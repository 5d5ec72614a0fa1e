"""XLNet models: the backbone (xlnet_model.py), the LM model of pretraining and generation
(lm_head_model.py, generation.py), and for each fine-tuning task the model with its head
(heads/) and the keras-hub-style model with a preprocessor around it, in one file each:
xlnet_classifier.py (classification, regression), xlnet_multiple_choice.py (RACE),
xlnet_question_answerer.py (SQuAD), xlnet_token_classifier.py (token classification). Each
is named by its task's declaration (xlnet_tf2/task_registry.py), and importing this package
defines every class a declaration names. Loading and saving by directory, release name or hub id:
pretrained.py, whose `load` is every class's from_pretrained / from_preset (our format on disk:
saving.py; xlnet-convert's directory job: directories.py)."""

from xlnet_tf2.models.head_model import HeadModel
from xlnet_tf2.models.lm_head_model import XLNetLMHeadModel
from xlnet_tf2.models.model_with_preprocessor import ModelWithPreprocessor
from xlnet_tf2.models.xlnet_classifier import SequenceClassifier, XLNetClassifier, XLNetRegressor
from xlnet_tf2.models.xlnet_model import XLNetModel
from xlnet_tf2.models.xlnet_multiple_choice import MultipleChoiceModel, XLNetMultipleChoice
from xlnet_tf2.models.xlnet_question_answerer import SquadModel, XLNetQuestionAnswerer
from xlnet_tf2.models.xlnet_token_classifier import TokenClassifier, XLNetTokenClassifier

__all__ = ["HeadModel", "ModelWithPreprocessor", "MultipleChoiceModel", "SequenceClassifier",
           "SquadModel", "XLNetClassifier", "XLNetLMHeadModel", "XLNetModel",
           "TokenClassifier", "XLNetMultipleChoice", "XLNetQuestionAnswerer", "XLNetRegressor",
           "XLNetTokenClassifier"]
