"""Hand-worked two-stream masks (tasks/objective.py, docs/SEMANTICS.md#masks) on 8-token
examples."""

import numpy as np
import tensorflow as tf

from xlnet_tf2.tasks.objective import two_stream_masks

from fixtures.mask_semantics import check_mask_semantics

SEP, CLS = 4, 3
# Positions 0..3 reused half, 4..7 new half: [a b c d | e <sep> f <cls>]
IDS = np.array([[20, 21, 22, 23, 24, SEP, 25, CLS]], np.int32)
# Factorization order: reused half 2, 0, 3, 1 ; new half 6, 4, 7, 5 (positions by rank).
RANK = np.array([[1, 3, 0, 2, 5, 7, 4, 6]], np.int32)
# Targets: positions 1, 2 (reused half) and 4, 6 (new half); padded with -1 to P = 5.
TARGETS = np.array([[1, 2, 4, 6, -1]], np.int32)


def _masks(ids=IDS, rank=RANK, targets=TARGETS):
    out = two_stream_masks(tf.constant(ids), tf.constant(rank), tf.constant(targets), 4)
    return {k: v.numpy()[0] for k, v in out.items()}


def test_perm_mask_hand_worked():
    # Row i lists what position i may NOT see (1). Worked by hand:
    #  0 a  non-target : blocks targets 1,2 of its half and the whole new half.
    #  1 b  target r3  : sees 0, 3 (non-targets) and 2 (rank 0 < 3); blocks itself; new half.
    #  2 c  target r0  : lowest rank; sees only non-targets 0, 3; blocks itself; new half.
    #  3 d  non-target : like 0.
    #  4 e  target r5  : sees the reused half; sees 6 (rank 4 < 5); blocks itself, <sep> 5
    #                    (rank 7) and <cls> 7 (rank 6).
    #  5 <sep> r7      : sees every target and <cls> of rank <= 7: all of its half, itself too.
    #  6 f  target r4  : lowest in its half: blocks itself, 4, 5, 7.
    #  7 <cls> r6      : sees 4 (r5), 6 (r4), itself (r6); blocks <sep> (r7).
    expected = np.array([
        [0, 1, 1, 0, 1, 1, 1, 1],
        [0, 1, 0, 0, 1, 1, 1, 1],
        [0, 1, 1, 0, 1, 1, 1, 1],
        [0, 1, 1, 0, 1, 1, 1, 1],
        [0, 0, 0, 0, 1, 1, 0, 1],
        [0, 0, 0, 0, 0, 0, 0, 0],
        [0, 0, 0, 0, 1, 1, 1, 1],
        [0, 0, 0, 0, 0, 1, 0, 0],
    ], np.float32)
    np.testing.assert_array_equal(_masks()["perm_mask"], expected)


def test_query_stream_never_sees_own_token():
    m = _masks()
    for p in TARGETS[0][TARGETS[0] >= 0]:
        assert m["perm_mask"][p, p] == 1


def test_non_targets_see_no_target_and_no_func_tokens():
    m = _masks()
    # The only non-target of the new half with a target or func token in sight would be a
    # plain token; add one by making position 4 a non-target.
    m = _masks(targets=np.array([[1, 2, 6, -1, -1]], np.int32))
    row4 = m["perm_mask"][4]
    np.testing.assert_array_equal(row4[4:], [0, 1, 1, 1])  # sees itself, not <sep>, f, <cls>
    np.testing.assert_array_equal(row4[:4], [0, 0, 0, 0])  # the whole reused half
    np.testing.assert_array_equal(m["perm_mask"][0, :4], [0, 1, 1, 0])


def test_reused_half_never_sees_new_half():
    m = _masks()
    np.testing.assert_array_equal(m["perm_mask"][:4, 4:], np.ones((4, 4)))


def test_func_tokens_are_not_targets_and_targets_are_tokens():
    # Even if <sep> (5) were stored as a target position it would be a target of the mask;
    # data preparation removes them, so targets never include 5 or 7.
    m = _masks()
    np.testing.assert_array_equal(m["target_mapping"].argmax(-1)[:4], [1, 2, 4, 6])
    np.testing.assert_array_equal(m["target_mapping"][4], np.zeros(8))
    np.testing.assert_array_equal(m["target"], [21, 22, 24, 25, 0])
    np.testing.assert_array_equal(m["target_mask"], [1, 1, 1, 1, 0])


def test_generic_checker_agrees_with_hand_worked_case():
    m = _masks()
    check_mask_semantics(m["perm_mask"], IDS[0], m["target_mapping"], RANK[0], 4)


def test_left_to_right_order_is_a_causal_language_model():
    # --factorization_order=left_to_right: the stored ranks are ignored and every position is
    # ranked by its place, so position i sees exactly 0..i-1 (a target) or 0..i (anything
    # else); the content stream adds the diagonal, so it is causal attention.
    out = two_stream_masks(tf.constant(IDS), tf.constant(RANK), tf.constant(TARGETS), 4,
                           order="left_to_right")
    perm_mask = out["perm_mask"].numpy()[0]
    is_target = np.zeros(8, bool)
    is_target[[1, 2, 4, 6]] = True
    expected = np.array([[j > i or (j == i and is_target[i]) for j in range(8)]
                         for i in range(8)], np.float32)
    np.testing.assert_array_equal(perm_mask, expected)
    # The reused/new half rule holds by itself; the same targets as the permutation order.
    assert perm_mask[:4, 4:].min() == 1 and perm_mask[4:, :4].max() == 0
    permuted = _masks()
    for name in ("target_mapping", "target", "target_mask"):
        np.testing.assert_array_equal(out[name].numpy()[0], permuted[name])
    # Any stored order gives the same masks.
    other = two_stream_masks(tf.constant(IDS), tf.constant(RANK[:, ::-1].copy()),
                             tf.constant(TARGETS), 4, order="left_to_right")
    np.testing.assert_array_equal(other["perm_mask"].numpy()[0], perm_mask)


def test_unknown_order_is_refused():
    import pytest
    with pytest.raises(ValueError, match="left_to_right"):
        two_stream_masks(tf.constant(IDS), tf.constant(RANK), tf.constant(TARGETS), 4,
                         order="right_to_left")
