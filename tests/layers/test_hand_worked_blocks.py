"""Hand-worked arrays for the position, shift, segment and mask building blocks."""

import numpy as np
import tensorflow as tf

from xlnet_tf2.layers import (build_attention_masks, causal_mask, gather_relative_scores,
                              rel_shift, relative_position_encoding, segment_matrix)
from xlnet_tf2.layers.relative_position import relative_distances
from xlnet_tf2.layers.step_plan import StepPlan


def _scores(rows, t_len, row_scale=10):
    return tf.constant([[[[row_scale * i + t for t in range(t_len)] for i in range(rows)]]],
                       tf.float32)


def test_rel_shift_bidirectional():
    # L = 2, M = 1, K = 3, T = K + L = 5; column t holds distance K - t = 3 - t.
    # Entry (i, j) must use distance M + i - j, i.e. column t = L - i + j.
    out = rel_shift(_scores(2, 5), k_len=3).numpy()[0, 0]
    np.testing.assert_array_equal(out, [[2, 3, 4], [11, 12, 13]])


def test_rel_shift_unidirectional_visible_entries():
    # T = K + 1 = 4. Visible keys j <= M + i.
    out = rel_shift(_scores(2, 4), k_len=3).numpy()[0, 0]
    np.testing.assert_array_equal(out[0, :2], [2, 3])
    np.testing.assert_array_equal(out[1, :3], [11, 12, 13])


def test_gather_relative_scores_matches_positions():
    # Query rows sit at positions 1 and 0 of the example: row p uses column t = L - pos_p + j.
    scores = _scores(2, 5, row_scale=100)
    out = gather_relative_scores(scores, tf.constant([[1, 0]]), q_len=2, k_len=3,
                                 plan=StepPlan()).numpy()[0, 0]
    np.testing.assert_array_equal(out, [[1, 2, 3], [102, 103, 104]])


def test_gather_agrees_with_rel_shift_on_every_row():
    rng = np.random.default_rng(0)
    scores = tf.constant(rng.normal(size=(2, 3, 6, 6 + 10)), tf.float32)  # L=6, M=4, K=10
    shifted = rel_shift(scores, k_len=10)
    positions = tf.constant([list(range(6))] * 2, tf.int32)
    gathered = gather_relative_scores(scores, positions, q_len=6, k_len=10, plan=StepPlan())
    np.testing.assert_array_equal(shifted.numpy(), gathered.numpy())


def test_relative_distances():
    np.testing.assert_array_equal(relative_distances(2, 3, "bi").numpy(), [3, 2, 1, 0, -1])
    np.testing.assert_array_equal(relative_distances(2, 3, "uni").numpy(), [3, 2, 1, 0])


def test_relative_position_encoding_values():
    # D = 4: inverse frequencies 1 and 1/100; sin half first, then cos half.
    emb = relative_position_encoding(q_len=2, k_len=3, d_model=4).numpy()
    assert emb.shape == (1, 5, 4)
    for t, distance in enumerate([3, 2, 1, 0, -1]):
        expected = [np.sin(distance), np.sin(distance / 100), np.cos(distance), np.cos(distance / 100)]
        np.testing.assert_allclose(emb[0, t], expected, atol=1e-6)


def test_relative_position_encoding_bi_data_and_clamp():
    emb = relative_position_encoding(2, 3, 4, bi_data=True, clamp_len=1).numpy()
    assert emb.shape == (2, 5, 4)
    forward = [1, 1, 1, 0, -1]  # 3, 2, 1, 0, -1 clamped to [-1, 1]
    backward = [-1, -1, -1, 0, 1]  # the negated distances, clamped
    for group, distances in enumerate([forward, backward]):
        for t, d in enumerate(distances):
            np.testing.assert_allclose(
                emb[group, t], [np.sin(d), np.sin(d / 100), np.cos(d), np.cos(d / 100)], atol=1e-6)


def test_segment_matrix_memory_counts_as_segment_zero():
    mismatch = segment_matrix(tf.constant([[0, 0, 1]]), m_len=2).numpy().astype(int)[0]
    np.testing.assert_array_equal(mismatch, [[0, 0, 0, 0, 1],
                                             [0, 0, 0, 0, 1],
                                             [1, 1, 1, 1, 0]])
    # Query rows for the query stream take the segment of their target position.
    rows = segment_matrix(tf.constant([[0, 0, 1]]), 2, query_segment_ids=tf.constant([[1]]))
    np.testing.assert_array_equal(rows.numpy().astype(int)[0], [[1, 1, 1, 1, 0]])


def test_causal_mask_with_memory_and_same_length():
    np.testing.assert_array_equal(causal_mask(3, 1).numpy().astype(int),
                                  [[0, 0, 1, 1], [0, 0, 0, 1], [0, 0, 0, 0]])
    np.testing.assert_array_equal(causal_mask(3, 1, same_length=True).numpy().astype(int),
                                  [[0, 0, 1, 1], [1, 0, 0, 1], [1, 1, 0, 0]])


def test_permutation_masks_for_both_streams():
    # Tokens 0, 1, 2 with one memory slot. Token 0 is context; tokens 2 then 1 are predicted
    # (rank 0 and 1). perm_mask[i, j] = 1 hides j from i.
    perm_mask = tf.constant([[[0, 1, 1],    # context sees no target
                              [0, 1, 0],    # token 1 (rank 1) sees token 2, not itself
                              [0, 1, 1]]],  # token 2 (rank 0) sees only context
                            tf.float32)
    content, query = build_attention_masks(batch_size=1, q_len=3, m_len=1, attn_type="bi",
                                           same_length=False, perm_mask=perm_mask)
    np.testing.assert_array_equal(query.numpy().astype(int)[0],
                                  [[0, 0, 1, 1], [0, 0, 1, 0], [0, 0, 1, 1]])
    # The content stream may always see itself (key column M + i).
    np.testing.assert_array_equal(content.numpy().astype(int)[0],
                                  [[0, 0, 1, 1], [0, 0, 0, 0], [0, 0, 1, 0]])


def test_padding_blocks_keys_only():
    content, query = build_attention_masks(batch_size=1, q_len=3, m_len=0, attn_type="bi",
                                           same_length=False,
                                           attention_mask=tf.constant([[0, 1, 1]]))
    np.testing.assert_array_equal(query.numpy().astype(int)[0], [[1, 0, 0]] * 3)
    np.testing.assert_array_equal(content.numpy().astype(int)[0], [[0, 0, 0], [1, 0, 0], [1, 0, 0]])


def test_no_masks_when_nothing_is_masked():
    assert build_attention_masks(batch_size=2, q_len=3, m_len=1, attn_type="bi",
                                 same_length=False) == (None, None)
