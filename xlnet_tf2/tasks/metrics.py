"""Evaluation metrics in numpy: accuracy, F1, Matthews correlation, Pearson, Spearman."""

from __future__ import annotations

from typing import Dict

import numpy as np


def accuracy(labels, predictions) -> float:
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    return float(np.mean(labels == predictions)) if labels.size else 0.0


def f1(labels, predictions, num_classes: int) -> float:
    """Binary: F1 of class 1 (GLUE MRPC/QQP convention). More classes: macro-averaged F1."""
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    classes = [1] if num_classes == 2 else list(range(num_classes))
    scores = []
    for c in classes:
        tp = np.sum((predictions == c) & (labels == c))
        fp = np.sum((predictions == c) & (labels != c))
        fn = np.sum((predictions != c) & (labels == c))
        denominator = 2 * tp + fp + fn
        scores.append(2 * tp / denominator if denominator else 0.0)
    return float(np.mean(scores))


def matthews_corrcoef(labels, predictions, num_classes: int) -> float:
    """Matthews correlation (multi-class form of Gorodkin 2004; the usual one for 2 classes)."""
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    confusion = np.zeros((num_classes, num_classes), np.float64)
    np.add.at(confusion, (labels, predictions), 1)
    t = confusion.sum(axis=1)       # true counts per class
    p = confusion.sum(axis=0)       # predicted counts per class
    c = np.trace(confusion)
    s = confusion.sum()
    denominator = np.sqrt((s * s - np.dot(p, p)) * (s * s - np.dot(t, t)))
    return float((c * s - np.dot(t, p)) / denominator) if denominator else 0.0


def pearson(x, y) -> float:
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    x, y = x - x.mean(), y - y.mean()
    denominator = np.sqrt(np.sum(x * x) * np.sum(y * y))
    return float(np.sum(x * y) / denominator) if denominator else 0.0


def _ranks(x) -> np.ndarray:
    """Ranks 1..n with ties given their average rank."""
    x = np.asarray(x, np.float64)
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x), np.float64)
    sorted_x = x[order]
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and sorted_x[j + 1] == sorted_x[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return ranks


def spearman(x, y) -> float:
    return pearson(_ranks(x), _ranks(y))


def classification_metrics(labels, predictions, num_classes: int) -> Dict[str, float]:
    return {"accuracy": accuracy(labels, predictions),
            "f1": f1(labels, predictions, num_classes),
            "mcc": matthews_corrcoef(labels, predictions, num_classes)}


def regression_metrics(labels, scores) -> Dict[str, float]:
    labels, scores = np.asarray(labels, np.float64), np.asarray(scores, np.float64)
    return {"pearson": pearson(labels, scores), "spearman": spearman(labels, scores),
            "mse": float(np.mean((labels - scores) ** 2)) if labels.size else 0.0}
