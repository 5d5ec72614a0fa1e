"""Model inputs built in-graph from ragged token ids, exactly as xlnet_tf2/tokenizers/packing.py
builds them offline (a test compares the two on real text).

Letters (docs/GLOSSARY.md): B batch, Q questions and C options of multiple choice, Wn windows of
a SQuAD context, L seq_len; n the (ragged) tokens of a row.
"""

from __future__ import annotations

from typing import Dict, Optional

import tensorflow as tf

from xlnet_tf2 import special_ids as sid


def _keep_first(ids: tf.RaggedTensor, keep: tf.Tensor) -> tf.RaggedTensor:
    """Row b keeps its first keep[b] tokens."""
    positions = tf.ragged.range(ids.row_lengths())
    return tf.ragged.boolean_mask(ids, positions < tf.cast(keep, positions.dtype)[:, None])


def _keep_last(ids: tf.RaggedTensor, keep: int) -> tf.RaggedTensor:
    """Every row keeps its last `keep` tokens."""
    lengths = ids.row_lengths()
    positions = tf.ragged.range(lengths)
    return tf.ragged.boolean_mask(ids, positions >= (lengths - keep)[:, None])


def truncated_lengths(len_a: tf.Tensor, len_b: Optional[tf.Tensor], seq_len: int):
    """In-graph `features.truncated_lengths` (int64 [B] each)."""
    if len_b is None:
        return tf.minimum(len_a, seq_len - 2), None
    budget = tf.constant(seq_len - 3, len_a.dtype)
    fits = len_a + len_b <= budget
    keep_a = tf.minimum(len_a, tf.maximum((budget + 1) // 2, budget - len_b))
    return (tf.where(fits, len_a, keep_a), tf.where(fits, len_b, budget - keep_a))


def _constant_rows(batch, value):
    return tf.RaggedTensor.from_tensor(tf.fill([batch, 1], tf.constant(value, tf.int32)))


def encode_sequence_pair(ids_a: tf.RaggedTensor, ids_b: Optional[tf.RaggedTensor], seq_len: int,
                         layout: str = "cls_last") -> Dict[str, tf.Tensor]:
    """input_ids, segment_ids, attention_mask: int32 [B, seq_len]."""
    batch = ids_a.nrows()
    keep_a, keep_b = truncated_lengths(ids_a.row_lengths(),
                                       None if ids_b is None else ids_b.row_lengths(), seq_len)
    a = _keep_first(ids_a, keep_a)
    parts = [a, _constant_rows(batch, sid.SEP_ID)]
    segs = [tf.zeros_like(a) + sid.SEG_ID_A, _constant_rows(batch, sid.SEG_ID_A)]
    if ids_b is not None:
        b = _keep_first(ids_b, keep_b)
        parts += [b, _constant_rows(batch, sid.SEP_ID)]
        segs += [tf.zeros_like(b) + sid.SEG_ID_B, _constant_rows(batch, sid.SEG_ID_B)]
    if layout == "cls_last":
        parts.append(_constant_rows(batch, sid.CLS_ID))
        segs.append(_constant_rows(batch, sid.SEG_ID_CLS))
    else:
        parts.insert(0, _constant_rows(batch, sid.CLS_ID))
        segs.insert(0, _constant_rows(batch, sid.SEG_ID_CLS))
    tokens = tf.concat(parts, axis=1)                                # [B, (n)]
    segments = tf.concat(segs, axis=1)
    mask = tf.ones_like(tokens)
    return {k: _pad(v, seq_len, pad, left=(layout == "cls_last"))
            for k, v, pad in (("input_ids", tokens, sid.PAD_ID),
                              ("segment_ids", segments, sid.SEG_ID_PAD),
                              ("attention_mask", mask, 0))}


def _pad(rows: tf.RaggedTensor, seq_len: int, value: int, left: bool) -> tf.Tensor:
    """Ragged [B, (n <= L)] -> dense [B, L], padded on the left or the right."""
    if left:
        rows = tf.reverse(rows, axis=[1])
    dense = rows.to_tensor(default_value=value, shape=[None, seq_len])
    return tf.reverse(dense, axis=[1]) if left else dense


def multiple_choice_texts(question: tf.Tensor, options: tf.Tensor) -> tf.Tensor:
    """RACE's question-option text of every option, as xlnet_tf2/tasks/race.py writes it:
    the question with "_" replaced by the option when it has a blank, else question + " " +
    option. question string [Q], options string [Q, O] -> string [Q*O] (question-major)."""
    choices = tf.shape(options)[1]
    questions = tf.reshape(tf.repeat(question, choices), [-1])           # [Q*C]
    flat_options = tf.reshape(options, [-1])                              # [Q*O]
    # str.replace("_", option): escape the rewrite string's backslashes.
    rewrite = tf.strings.regex_replace(flat_options, r"\\", r"\\\\")
    blank = tf.strings.regex_full_match(questions, "(?s).*_.*")
    filled = tf.map_fn(lambda qo: tf.strings.regex_replace(qo[0], "_", qo[1]),
                       (questions, rewrite), fn_output_signature=tf.string)
    return tf.where(blank, filled, tf.strings.join([questions, flat_options], " "))


def encode_multiple_choice(article_ids: tf.RaggedTensor, qa_ids: tf.RaggedTensor,
                           seq_len: int, max_qa_length: int) -> Dict[str, tf.Tensor]:
    """One RACE sequence per (article, question-option) row, as xlnet_tf2/tasks/race.py:
    `article <sep> qa <sep> <cls>`, left padded; qa keeps its LAST max_qa_length tokens, the
    article its first seq_len - 3 - len(qa). Ragged [B, (n)] each -> int32 [B, seq_len]."""
    qa_ids = _keep_last(qa_ids, max_qa_length)
    context = _keep_first(article_ids, tf.maximum(seq_len - 3 - qa_ids.row_lengths(), 0))
    return encode_sequence_pair(context, qa_ids, seq_len, "cls_last")


def encode_squad(context_ids: tf.RaggedTensor, question_ids: tf.RaggedTensor, seq_len: int,
                 max_query_length: int) -> Dict[str, tf.Tensor]:
    """The first SQuAD window, as xlnet_tf2/tasks/squad_data.py builds it offline:
    context <sep> question <sep> <cls>, right padded; the question keeps its first
    max_query_length tokens, the context its first seq_len - 3 - len(question).
    Returns input_ids, segment_ids, attention_mask: int32 [B, seq_len]."""
    batch = context_ids.nrows()
    question = _keep_first(question_ids, tf.fill([batch], tf.cast(max_query_length, tf.int64)))
    context = _keep_first(context_ids, tf.maximum(seq_len - 3 - question.row_lengths(), 0))
    tokens = tf.concat([context, _constant_rows(batch, sid.SEP_ID), question,
                        _constant_rows(batch, sid.SEP_ID), _constant_rows(batch, sid.CLS_ID)],
                       axis=1)                                       # [B, (n)]
    segments = tf.concat([tf.zeros_like(context) + sid.SEG_ID_A, _constant_rows(batch, sid.SEG_ID_A),
                          tf.zeros_like(question) + sid.SEG_ID_B,
                          _constant_rows(batch, sid.SEG_ID_B),
                          _constant_rows(batch, sid.SEG_ID_CLS)], axis=1)
    return {k: _pad(v, seq_len, pad, left=False)
            for k, v, pad in (("input_ids", tokens, sid.PAD_ID),
                              ("segment_ids", segments, sid.SEG_ID_PAD),
                              ("attention_mask", tf.ones_like(tokens), 0))}


def squad_answer_inputs(input_ids: tf.Tensor, segment_ids: tf.Tensor,
                        attention_mask: tf.Tensor) -> Dict[str, tf.Tensor]:
    """p_mask [B, L] and cls_index [B] of a SQuAD layout, derived from the ids: document
    tokens (segment A, not <sep>) and <cls> may be predicted (p_mask 0), all else not.
    Also doc_length [B], the number of document tokens (they are positions 0..doc_length-1)."""
    doc = ((segment_ids == sid.SEG_ID_A) & (input_ids != sid.SEP_ID) & (attention_mask > 0))
    cls = input_ids == sid.CLS_ID
    return {"p_mask": tf.cast(~(doc | cls), tf.int32),
            "cls_index": tf.argmax(tf.cast(cls, tf.int32), axis=1, output_type=tf.int32),
            "doc_length": tf.reduce_sum(tf.cast(doc, tf.int32), axis=1)}


def answer_positions(char_start: tf.RaggedTensor, char_end: tf.RaggedTensor,
                     answer_start: tf.Tensor, answer_end: tf.Tensor, doc_length: tf.Tensor,
                     cls_index: tf.Tensor) -> Dict[str, tf.Tensor]:
    """The labels of a context's first window, as xlnet_tf2/tasks/squad_data.py gives them:
    the first and last token overlapping the answer's raw characters [answer_start,
    answer_end) (tokens with an empty span never count) when both lie in the window's
    doc_length document tokens, else the window's <cls> (and is_impossible 1; so is an empty
    answer). Token spans ragged [B, (n)], the rest [B] -> start_positions, end_positions
    int32 [B], is_impossible float32 [B]."""
    answer_start = tf.cast(answer_start, tf.int64)[:, None]
    answer_end = tf.cast(answer_end, tf.int64)[:, None]
    starts, ends = char_start.to_tensor(0), char_end.to_tensor(0)           # [B, n]
    hits = (starts < answer_end) & (ends > answer_start) & (ends > starts)
    hits &= answer_end > answer_start
    count = tf.shape(hits)[1]
    first = tf.argmax(tf.cast(hits, tf.int32), axis=1, output_type=tf.int32)
    last = count - 1 - tf.argmax(tf.cast(tf.reverse(hits, [1]), tf.int32), axis=1,
                                 output_type=tf.int32)
    inside = tf.reduce_any(hits, axis=1) & (last < tf.cast(doc_length, tf.int32))
    cls_index = tf.cast(cls_index, tf.int32)
    return {"start_positions": tf.where(inside, first, cls_index),
            "end_positions": tf.where(inside, last, cls_index),
            "is_impossible": tf.cast(~inside, tf.float32)}


def squad_windows(context_ids: tf.RaggedTensor, question_ids: tf.RaggedTensor, seq_len: int,
                  doc_stride: int, max_query_length: int) -> Dict[str, tf.Tensor]:
    """Every document window of each (context, question), as
    xlnet_tf2/tasks/squad_data.py `window_spans` / `build_windows` make them offline:
    the question keeps its first max_query_length tokens; window w of a context of n tokens
    starts at w * min(doc_stride, room) and holds min(n - start, room) tokens, with room =
    seq_len - 3 - len(question); windows continue until one reaches the context's end (an
    empty context has one empty window). Wn = the most windows any row of the batch needs
    (dynamic).

    Returns, with B batch, Wn windows, L seq_len:
      input_ids, segment_ids, attention_mask, p_mask int32 [B, Wn, L]; cls_index int32 [B, Wn]
        (the offline layout: doc <sep> question <sep> <cls>, right padded);
      valid bool [B, Wn] (window w exists for row b); doc_offset, doc_length int32 [B, Wn];
      max_context bool [B, Wn, L]: position p of window w is a document token and w is the
        window where that token has the most context (min(left, right) + 0.01 * length, the
        first window on ties; compared as 100 * min + length, exact integers).
    """
    L = seq_len
    question = _keep_first(question_ids, tf.fill([question_ids.nrows()],
                                                 tf.cast(max_query_length, tf.int64)))
    q_len = tf.cast(question.row_lengths(), tf.int32)                        # [B]
    t_len = tf.cast(context_ids.row_lengths(), tf.int32)                     # [B]
    max_doc = L - 3 - q_len                                                  # [B]
    step = tf.maximum(tf.minimum(doc_stride, max_doc), 1)
    needed = 1 + (tf.maximum(t_len - max_doc, 0) + step - 1) // step         # [B]
    num_windows = tf.reduce_max(needed)                                      # Wn
    w = tf.range(num_windows)[None, :]                                       # [1, Wn]
    valid = w < needed[:, None]                                              # [B, Wn]
    offset = w * step[:, None]
    length = tf.where(valid, tf.clip_by_value(t_len[:, None] - offset, 0, max_doc[:, None]), 0)
    p = tf.range(L)[None, None, :]                                           # [1, 1, L]
    off3, len3, q3 = offset[:, :, None], length[:, :, None], q_len[:, None, None]
    context = context_ids.to_tensor(sid.PAD_ID)                              # [B, n_max]
    context = tf.pad(context, [[0, 0], [0, 1]], constant_values=sid.PAD_ID)  # n_max >= 1
    doc_position = tf.minimum(off3 + p, tf.shape(context)[1] - 1)
    doc_tokens = tf.gather(context, doc_position, batch_dims=1)              # [B, Wn, L]
    question_d = tf.pad(question.to_tensor(sid.PAD_ID), [[0, 0], [0, 1]],
                        constant_values=sid.PAD_ID)
    q_position = tf.clip_by_value(p - len3 - 1, 0, tf.shape(question_d)[1] - 1)
    question_tokens = tf.gather(question_d, tf.broadcast_to(q_position, tf.shape(doc_tokens)),
                                batch_dims=1)                                 # [B, Wn, L]
    cls = len3 + q3 + 2
    in_doc, first_sep = p < len3, tf.equal(p, len3)
    in_question = (p > len3) & (p <= len3 + q3)
    second_sep, at_cls = tf.equal(p, len3 + q3 + 1), tf.equal(p, cls)
    ids = tf.where(in_doc, doc_tokens, tf.where(in_question, question_tokens, sid.PAD_ID))
    ids = tf.where(first_sep | second_sep, sid.SEP_ID, tf.where(at_cls, sid.CLS_ID, ids))
    segments = tf.where(in_doc | first_sep, sid.SEG_ID_A,
                        tf.where(in_question | second_sep, sid.SEG_ID_B,
                                 tf.where(at_cls, sid.SEG_ID_CLS, sid.SEG_ID_PAD)))
    attention = tf.cast(p <= cls, tf.int32)
    p_mask = tf.cast(~(in_doc | at_cls), tf.int32)
    # max_context: for each document position, the best window over all windows of the row.
    token = off3 + p                                                         # [B, Wn, L]
    other_off = offset[:, None, None, :]                                     # [B, 1, 1, Wn']
    other_len = length[:, None, None, :]
    inside = ((token[..., None] >= other_off) & (token[..., None] < other_off + other_len)
              & valid[:, None, None, :])
    score = 100 * tf.minimum(token[..., None] - other_off,
                             other_off + other_len - 1 - token[..., None]) + other_len
    score = tf.where(inside, score, -1)
    best = tf.argmax(score, axis=-1, output_type=tf.int32)                   # first maximum
    max_context = in_doc & tf.equal(best, tf.range(num_windows)[None, :, None])
    return {"input_ids": ids, "segment_ids": segments, "attention_mask": attention,
            "p_mask": p_mask, "cls_index": tf.squeeze(cls, -1), "valid": valid,
            "doc_offset": offset, "doc_length": length, "max_context": max_context}
