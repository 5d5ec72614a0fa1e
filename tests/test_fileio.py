"""xlnet_tf2/fileio.py's readers: a JSON-lines file read back value by value."""

from xlnet_tf2 import fileio


def test_read_jsonl_skips_blank_lines_and_reads_a_missing_file_as_empty(tmp_path):
    path = tmp_path / "eval_results.jsonl"
    assert fileio.read_jsonl(str(path)) == []
    path.write_text('{"step": 2, "loss": 1.5}\n\n{"step": 4, "loss": 1.25}\n', encoding="utf-8")
    assert fileio.read_jsonl(str(path)) == [{"step": 2, "loss": 1.5}, {"step": 4, "loss": 1.25}]
