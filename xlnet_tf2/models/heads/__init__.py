"""Task heads on top of the XLNet backbone's hidden states [B, L, D]."""

from xlnet_tf2.models.heads.classification_head import ClassificationHead
from xlnet_tf2.models.heads.multiple_choice_head import MultipleChoiceHead
from xlnet_tf2.models.heads.sequence_summary import SUMMARY_TYPES, SequenceSummary
from xlnet_tf2.models.heads.squad_head import SquadHead

__all__ = ["ClassificationHead", "MultipleChoiceHead", "SUMMARY_TYPES", "SequenceSummary",
           "SquadHead"]
