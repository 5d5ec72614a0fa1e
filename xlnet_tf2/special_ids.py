"""The XLNet vocabulary's fixed special ids (docs/SEMANTICS.md#special-ids).

Control symbols never come out of encoding raw text; code inserts them by id. `<eop>` is a
user-defined piece, so SentencePiece matches it inside raw text.
"""

UNK_ID = 0
BOS_ID = 1
EOS_ID = 2
CLS_ID = 3
SEP_ID = 4
PAD_ID = 5
MASK_ID = 6
EOD_ID = 7
EOP_ID = 8

# Piece strings in id order; index == id.
SPECIAL_PIECES = ("<unk>", "<s>", "</s>", "<cls>", "<sep>", "<pad>", "<mask>", "<eod>", "<eop>")
CONTROL_PIECES = ("<cls>", "<sep>", "<pad>", "<mask>", "<eod>")
USER_DEFINED_PIECES = ("<eop>",)

# Segment ids used by the fine-tuning formats (docs/SEMANTICS.md#fine-tuning-formats).
SEG_ID_A = 0
SEG_ID_B = 1
SEG_ID_CLS = 2
SEG_ID_SEP = 3
SEG_ID_PAD = 4
