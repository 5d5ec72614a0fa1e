"""XLNet models: the backbone, the LM model of pretraining, the task models and their heads
(heads/), generation (generation.py), loading and saving by directory, release name or hub id
(pretrained.py; our format on disk: saving.py; task directories of any kind and xlnet-convert:
directories.py)."""

from xlnet_tf2.models.lm_head_model import XLNetLMHeadModel
from xlnet_tf2.models.multiple_choice_model import MultipleChoiceModel
from xlnet_tf2.models.sequence_classifier import SequenceClassifier
from xlnet_tf2.models.squad_model import SquadModel
from xlnet_tf2.models.task_model import TaskModel
from xlnet_tf2.models.xlnet_model import XLNetModel

__all__ = ["MultipleChoiceModel", "SequenceClassifier", "SquadModel", "TaskModel",
           "XLNetLMHeadModel", "XLNetModel"]
