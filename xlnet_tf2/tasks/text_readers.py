"""Sentence(-pair) classification and regression examples from local files or TFDS.

Local files: `.tsv`, `.csv` (a header row names the columns) or `.jsonl` (one JSON object per
line); the text and label columns are chosen by name. TensorFlow Datasets by name
(`glue/sst2`, `glue/mnli`, `glue/stsb`, `imdb_reviews`, ...): known datasets have default
columns (`TFDS_DEFAULTS`), any other needs the column flags. Every error names the file (or
dataset and split) and the record (line number, or index in the split).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
from typing import Dict, List, Optional, Sequence, Tuple

import tensorflow as tf

from xlnet_tf2.tasks.errors import TaskDataError


@dataclasses.dataclass(frozen=True)
class TextExample:
    guid: str
    text_a: str
    text_b: Optional[str]
    label: object  # str (classification, before mapping), float (regression) or None


# name -> (text_a column, text_b column, label column, evaluation split)
TFDS_DEFAULTS: Dict[str, Tuple[str, Optional[str], str, str]] = {
    "glue/sst2": ("sentence", None, "label", "validation"),
    "glue/cola": ("sentence", None, "label", "validation"),
    "glue/mrpc": ("sentence1", "sentence2", "label", "validation"),
    "glue/qqp": ("question1", "question2", "label", "validation"),
    "glue/stsb": ("sentence1", "sentence2", "label", "validation"),
    "glue/mnli": ("premise", "hypothesis", "label", "validation_matched"),
    "glue/qnli": ("question", "sentence", "label", "validation"),
    "glue/rte": ("sentence1", "sentence2", "label", "validation"),
    "imdb_reviews": ("text", None, "label", "test"),
    "yelp_polarity_reviews": ("text", None, "label", "test"),
}

_FORMATS = ("tsv", "csv", "jsonl")


def file_format(path: str) -> str:
    ext = os.path.splitext(path)[1].lstrip(".").lower()
    if ext not in _FORMATS:
        raise TaskDataError(path, None, f"unknown file type {ext!r}; use .tsv, .csv or .jsonl.")
    return ext


def read_utf8_text(path: str) -> str:
    """The text of a UTF-8 file; invalid bytes raise TaskDataError naming the line."""
    if not tf.io.gfile.exists(path):
        raise TaskDataError(path, None, "file does not exist.")
    if tf.io.gfile.isdir(path):
        raise TaskDataError(path, None, "is a directory; pass a file.")
    with tf.io.gfile.GFile(path, "rb") as f:
        data = f.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise TaskDataError(path, f"line {line}", f"is not valid UTF-8 (byte "
                            f"{data[e.start:e.start + 1]!r} at offset {e.start}); convert the "
                            "file to UTF-8.") from None


def read_json_file(path: str):
    """The JSON value of a UTF-8 file; a missing file, invalid UTF-8 or invalid JSON raise
    TaskDataError naming the file (and line)."""
    text = read_utf8_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise TaskDataError(path, None, f"malformed JSON ({e.msg} at line {e.lineno}, column "
                            f"{e.colno}); the file is cut short or not JSON.") from None


def _rows(path: str):
    """Yields (record number, dict of column -> value); record = 1-based data line."""
    fmt = file_format(path)
    text = read_utf8_text(path)
    if fmt == "jsonl":
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise TaskDataError(path, f"line {number}", f"malformed JSON ({e}).") from None
            if not isinstance(row, dict):
                raise TaskDataError(path, f"line {number}", "expected a JSON object.")
            yield f"line {number}", row
        return
    reader = csv.reader(io.StringIO(text), delimiter="\t" if fmt == "tsv" else ",",
                        quoting=csv.QUOTE_NONE if fmt == "tsv" else csv.QUOTE_MINIMAL)
    header = next(reader, None)
    if header is None:
        raise TaskDataError(path, None, "file is empty (expected a header row naming the columns).")
    for number, values in enumerate(reader, start=2):
        if not values:
            continue
        if len(values) != len(header):
            raise TaskDataError(path, f"line {number}", f"has {len(values)} fields, the header "
                                f"has {len(header)} ({header}).")
        yield f"line {number}", dict(zip(header, values))


def _column(path, record, row, name, required=True):
    if name not in row:
        if not required:
            return None
        raise TaskDataError(path, record, f"missing column {name!r} (columns: {sorted(row)}); "
                            "set the column flags (--text_a_column, --text_b_column, "
                            "--label_column).")
    return row[name]


def read_text_file(path: str, text_a_column: str, text_b_column: Optional[str],
                   label_column: Optional[str], regression: bool) -> List[TextExample]:
    """Examples of a TSV/CSV/JSONL file; labels stay raw strings for classification."""
    examples = []
    for record, row in _rows(path):
        text_a = _column(path, record, row, text_a_column)
        text_b = None if not text_b_column else _column(path, record, row, text_b_column)
        label = None
        if label_column:
            raw = _column(path, record, row, label_column)
            if regression:
                try:
                    label = float(raw)
                except (TypeError, ValueError):
                    raise TaskDataError(path, record, f"label {raw!r} is not a number "
                                        "(regression task).") from None
            else:
                label = str(raw)
        for name, value in ((text_a_column, text_a), (text_b_column, text_b)):
            if value is not None and not isinstance(value, str):
                raise TaskDataError(path, record, f"column {name!r} must hold text, got {value!r}.")
        examples.append(TextExample(f"{os.path.basename(path)}:{record}", text_a, text_b, label))
    if not examples:
        raise TaskDataError(path, None, "holds no records.")
    return examples


def read_tfds(name: str, split: str, text_a_column: Optional[str] = None,
              text_b_column: Optional[str] = None, label_column: Optional[str] = None,
              regression: bool = False, data_dir: Optional[str] = None
              ) -> Tuple[List[TextExample], Optional[List[str]]]:
    """Examples of a TensorFlow Datasets split and the label names (None for regression).

    Needs the dataset prepared in `data_dir` (or downloadable by TFDS); a dataset prepared
    there is found by name without its builder class. Records are read in the split's stored
    order. Unlabeled records (GLUE test splits use label -1) are kept with label None.
    """
    import tensorflow_datasets as tfds

    defaults = TFDS_DEFAULTS.get(name)
    if defaults is None and not (text_a_column and label_column):
        raise TaskDataError(f"tfds:{name}", None, "is not in TFDS_DEFAULTS; give "
                            "--text_a_column and --label_column (and --text_b_column for pairs).")
    if defaults:
        text_a_column = text_a_column or defaults[0]
        text_b_column = text_b_column if text_b_column is not None else defaults[1]
        label_column = label_column or defaults[2]
    source = f"tfds:{name}[{split}]"
    where = f"--tfds_data_dir={data_dir}" if data_dir else "TFDS's default data directory"
    try:
        dataset, info = tfds.load(name, split=split, with_info=True, data_dir=data_dir,
                                  shuffle_files=False)
    except Exception as e:  # tfds raises many types (not found, download, missing split, ...)
        # Its messages run to hundreds of lines (a "not found" lists every dataset it knows).
        first = (str(e).strip().splitlines() or [""])[0]
        raise TaskDataError(source, None, f"could not be loaded from {where} "
                            f"({type(e).__name__}: {first}). Prepare it with `tfds build` "
                            "and pass its data directory as --tfds_data_dir.") from None
    columns = sorted(info.features.keys())
    for flag, column in (("--text_a_column", text_a_column), ("--text_b_column", text_b_column),
                         ("--label_column", label_column)):
        if column and column not in info.features:
            raise TaskDataError(source, None, f"has no column {column!r} (columns: {columns}); "
                                f"fix {flag}.")
    label_names = None
    if not regression:
        feature = info.features[label_column]
        label_names = list(getattr(feature, "names", None) or [])
        if not label_names:
            raise TaskDataError(source, None, f"column {label_column!r} has no class names; "
                                "use --kind=regression for a numeric label.")
    examples = []
    for index, row in enumerate(tfds.as_numpy(dataset)):
        def text(column):
            if column not in row:
                raise TaskDataError(source, index, f"missing column {column!r} (columns: "
                                    f"{sorted(row)}).")
            value = row[column]
            return value.decode("utf-8") if isinstance(value, bytes) else str(value)

        raw = row.get(label_column)
        label = None
        if raw is not None and not (not regression and int(raw) < 0):
            label = float(raw) if regression else label_names[int(raw)]
        examples.append(TextExample(f"{source}:{index}", text(text_a_column),
                                    text(text_b_column) if text_b_column else None, label))
    return examples, label_names


def label_ids(examples: Sequence[TextExample], label_list: Sequence[str], source: str) -> List[int]:
    """Maps string labels to ids; a label outside `label_list` names the file and record."""
    index = {label: i for i, label in enumerate(label_list)}
    ids = []
    for example in examples:
        if example.label not in index:
            raise TaskDataError(source, example.guid.rsplit(":", 1)[-1],
                                f"label {example.label!r} is not in the label set {list(label_list)}.")
        ids.append(index[example.label])
    return ids
