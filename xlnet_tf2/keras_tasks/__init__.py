"""keras-hub-style task models: a task model of xlnet_tf2.models with a preprocessor attached,
`from_preset`, `fit` / `evaluate` / `predict` on raw strings or token dicts, `.keras` files
that carry the SentencePiece model (xlnet_task.py says how).

  XLNetClassifier        text / text-pair classification     logits [B, num_classes]
  XLNetRegressor         text / text-pair regression         scores [B]
  XLNetMultipleChoice    RACE-style multiple choice          logits [B, num_choices]
  XLNetQuestionAnswerer  SQuAD-style extractive QA           the SQuAD head's dict
"""

from xlnet_tf2.keras_tasks.xlnet_classifier import XLNetClassifier
from xlnet_tf2.keras_tasks.xlnet_multiple_choice import XLNetMultipleChoice
from xlnet_tf2.keras_tasks.xlnet_question_answerer import XLNetQuestionAnswerer
from xlnet_tf2.keras_tasks.xlnet_regressor import XLNetRegressor
from xlnet_tf2.keras_tasks.xlnet_task import XLNetTask

__all__ = ["XLNetClassifier", "XLNetMultipleChoice", "XLNetQuestionAnswerer", "XLNetRegressor",
           "XLNetTask"]
