"""The README's Python examples run as written."""

import os
import re

import pytest

README = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")


def _python_blocks():
    text = open(README).read()
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_model_api_example_runs():
    block = next(b for b in _python_blocks() if "XLNetLMHeadModel(config)" in b)
    namespace = {}
    exec(compile(block, "README.md", "exec"), namespace)
    out = namespace["out"]
    assert tuple(out["logits"].shape) == (2, 3, 1000)
    assert tuple(out["hidden"].shape) == (2, 3, 64)
    assert tuple(out["new_mems"][0].shape) == (2, 8, 64)


def _run_block(marker):
    block = next(b for b in _python_blocks() if marker in b)
    namespace = {}
    exec(compile(block, "README.md", "exec"), namespace)
    return namespace


@pytest.fixture
def converted_base(tmp_path, monkeypatch):
    """A tiny converted directory standing in for converted/base, in the working directory."""
    import xlnet_tf2
    from fixtures.task_files import train_tiny_spm

    spm = train_tiny_spm(str(tmp_path))
    config = xlnet_tf2.XLNetConfig.preset("tiny", n_token=500)
    model = xlnet_tf2.XLNetLMHeadModel(config)
    model.build()
    xlnet_tf2.save_pretrained(model, str(tmp_path / "converted" / "base"), spm_model=spm)
    monkeypatch.chdir(tmp_path)
    return config


def test_huggingface_style_example_runs(converted_base):
    """The example as written, on a tiny converted directory standing in for converted/base."""
    config = converted_base
    namespace = _run_block("from_pretrained(path")
    out, batch = namespace["out"], namespace["batch"]
    assert tuple(out["last_hidden_state"].shape) == (2, batch["input_ids"].shape[1],
                                                     config.d_model)
    assert len(out["hidden_states"]) == config.n_layer + 1 and len(out["mems"]) == config.n_layer
    assert namespace["tokenizer"].decode(batch["input_ids"][0], skip_special_tokens=True) == \
        "Sort the list in place."
    text = namespace["generate_text"](namespace["model"], namespace["tokenizer"], "The list is",
                                      max_new_tokens=8)
    assert len(text) == 1 and text[0].startswith("The list is")


def test_huggingface_style_tokenizer_and_generation_examples_run(tmp_path, monkeypatch,
                                                                  capsys):
    """The section's three blocks in order (one namespace, as a reader runs them), on a tiny
    converted directory; what they print and build is checked."""
    import numpy as np

    import xlnet_tf2
    from fixtures.task_files import train_tiny_spm

    spm = train_tiny_spm(str(tmp_path))
    model = xlnet_tf2.XLNetLMHeadModel(xlnet_tf2.XLNetConfig.preset("tiny", n_token=500))
    model.build()
    xlnet_tf2.save_pretrained(model, str(tmp_path / "converted" / "base"), spm_model=spm)
    monkeypatch.chdir(tmp_path)
    blocks = _python_blocks()
    first = next(i for i, b in enumerate(blocks) if "from_pretrained(path" in b)
    section = blocks[first:first + 3]
    assert "return_offsets_mapping=True" in section[1] and "num_beams=4" in section[2]
    namespace = {}
    for block in section:
        exec(compile(block, "README.md", "exec"), namespace)
    printed = capsys.readouterr().out
    tokenizer, windows = namespace["tokenizer"], namespace["windows"]
    context = namespace["context"]
    # windows: several, all from the one pair, each holding a piece of the context
    assert len(windows["input_ids"]) > 2 and not windows["overflow_to_sample_mapping"].any()
    for ids, spans, types in zip(windows["input_ids"], windows["offset_mapping"],
                                 windows["token_type_ids"]):
        for token_id, (start, end), kind in zip(ids, spans, types):
            if kind == 1 and end > start:   # a context token: its span holds its characters
                piece = tokenizer.convert_ids_to_tokens(int(token_id)).replace("\u2581", "")
                assert piece in context[start:end] or token_id == 0
    assert "Sort it.<sep>Keep it.<sep><cls>" in printed
    assert "(2, 8)" in printed                                    # padded to a multiple of 8
    assert sorted(os.listdir("my_tokenizer")) == ["special_tokens_map.json", "spiece.model",
                                                  "tokenizer_config.json"]
    transformers = pytest.importorskip("transformers")
    hf = transformers.AutoTokenizer.from_pretrained("my_tokenizer")
    assert hf("Sort the list.")["input_ids"] == tokenizer.encode("Sort the list.")
    # generation: 2 of 4 beams; the streamer saw every new token in order
    assert namespace["beams"].shape[0] == 2
    greedy, prompt = namespace["greedy"], namespace["prompt"]
    assert namespace["streamed"] == greedy[0, len(prompt[0]):].tolist()
    assert len(namespace["streamed"]) == 8
    assert len(namespace["samples"]) == 3 and all(s.startswith("The list is")
                                                  for s in namespace["samples"])
    np.testing.assert_array_equal(greedy, namespace["model"].generate(
        prompt, max_new_tokens=8, eos_token_id=None))


def test_keras_hub_style_example_runs(converted_base):
    import numpy as np

    namespace = _run_block('XLNetClassifier.from_preset("converted/base", num_classes=2')
    classifier, restored = namespace["classifier"], namespace["restored"]
    texts = namespace["texts"]
    assert namespace["logits"].shape == (1, 2) and namespace["pairs"].shape == (4, 2)
    expected = classifier.predict(texts, verbose=0)
    np.testing.assert_allclose(restored.predict(texts, verbose=0), expected, atol=1e-6)
    np.testing.assert_allclose(namespace["again"].predict(texts, verbose=0), expected, atol=1e-6)
    assert 0.0 <= namespace["accuracy"] <= 1.0 and namespace["loss"] > 0


def test_back_to_huggingface_example_runs(converted_base):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    namespace = _run_block('format="huggingface")  # config.json')
    assert namespace["diff"] <= 1e-5
    assert namespace["hf_classifier"].config.id2label == {0: "negative", 1: "positive"}


# ---------------------------------------------------------------------------- the README's tables
ROOT = os.path.dirname(README)


def _table(header):
    """The rows (lists of cells) of the README's Markdown table whose header row starts with
    `header`."""
    lines = open(README).read().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def _scripts():
    import tomllib

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]["scripts"]


def console_script_problems(rows, scripts, root):
    """What the console-script table `rows` gets wrong against pyproject.toml's `scripts`: a
    script missing or unknown, or a checkout file that is not the command's."""
    table = {re.sub(r"[`]", "", name): re.sub(r"[`]", "", path) for name, path, _ in rows}
    problems = [f"{name}: not in the table" for name in sorted(set(scripts) - set(table))]
    problems += [f"{name}: no such console script" for name in sorted(set(table) - set(scripts))]
    for name in sorted(set(table) & set(scripts)):
        path = table[name].split()[-1]
        module = scripts[name].split(":")[0]
        file = os.path.join(root, path)
        if not os.path.isfile(file) or f"from {module} import main" not in open(file).read():
            problems.append(f"{name}: {path} does not run {module}")
    return problems


def test_the_console_script_table_is_pyprojects():
    """Every console script of pyproject.toml is a row of the README's table, with the
    checkout file that runs the same command (xlnet-tag was missing)."""
    assert console_script_problems(_table("| console script |"), _scripts(), ROOT) == []


def test_the_console_script_check_finds_a_missing_or_wrong_row():
    rows = [["`xlnet-race`", "`python experiments/run_race.py`", "RACE"],
            ["`xlnet-squad`", "`python experiments/run_race.py`", "SQuAD"],
            ["`xlnet-old`", "`python experiments/old.py`", "gone"]]
    scripts = {"xlnet-race": "xlnet_tf2.commands.run_race:main",
               "xlnet-squad": "xlnet_tf2.commands.run_squad:main",
               "xlnet-tag": "xlnet_tf2.commands.run_tagger:main"}
    assert console_script_problems(rows, scripts, ROOT) == [
        "xlnet-tag: not in the table", "xlnet-old: no such console script",
        "xlnet-squad: experiments/run_race.py does not run xlnet_tf2.commands.run_squad"]


def _floors():
    """{room: floor index, 0 = the ground floor} of pyproject.toml's import-linter layers."""
    import tomllib

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        layers = tomllib.load(f)["tool"]["importlinter"]["contracts"][0]["layers"]
    return {room.strip(): floor for floor, spec in enumerate(reversed(layers))
            for room in re.split(r"[|:]", spec)}


def layout_rooms(rows):
    """[(row index, room)] of the Layout table's package rows: `xlnet_tf2/config.py` and the
    bare names after it (`config_flags.py`), `xlnet_tf2/layers/`, ... as import-linter rooms
    (config, config_flags, layers, ...)."""
    rooms = []
    for index, row in enumerate(rows):
        for item in re.findall(r"`([^`]+)`", row[0]):
            if item.startswith("xlnet_tf2/") or (rooms and rooms[-1][0] == index
                                                 and item.endswith(".py")):
                rooms.append((index, item.removeprefix("xlnet_tf2/").strip("/")
                              .removesuffix(".py")))
    return rooms


def layout_problems(rows, floors):
    """The rooms of the package the Layout table leaves out or names in no room, and rows out
    of the floors' order (the table goes from the bottom up)."""
    rooms = layout_rooms(rows)
    named = {room for _, room in rooms}
    problems = [f"{room}: not in the table" for room in sorted(set(floors) - named)]
    problems += [f"{room}: no such room" for room in sorted(named - set(floors))]
    last = -1
    for index, room in rooms:
        if room in floors:
            if floors[room] < last:
                problems.append(f"{room}: listed above a higher floor")
            last = max(last, floors[room])
    return problems


def test_the_layout_table_names_every_room_from_the_bottom_up():
    """Every module and subpackage of the package's floors (pyproject.toml) is in the README's
    Layout table, in floor order (lazy_names.py and task_registry.py were missing)."""
    assert layout_problems(_table("| where | what |"), _floors()) == []


def test_the_layout_check_finds_a_missing_room_and_a_wrong_order():
    rows = [["`xlnet_tf2/config.py`, `fileio.py`", "ground"], ["`xlnet_tf2/models/`", "models"],
            ["`xlnet_tf2/layers/`", "layers"]]
    floors = {"config": 0, "fileio": 0, "lazy_names": 0, "layers": 1, "models": 2}
    assert layout_problems(rows, floors) == ["lazy_names: not in the table",
                                             "layers: listed above a higher floor"]


# Words of the Layout table that are also module names but mean something else there.
NOT_MODULE_NAMES = {
    "task": "a fine-tuning task (the tasks row), not training/task.py's protocol",
    "readers": "a task's data readers (tasks/text_readers.py), not conversion/readers.py",
    "step": "a training step (the step's plan, a step's math), not training/step.py",
}


def misplaced_modules(rows, root):
    """'module (row's folders)' for every word of a Layout row's description that is the name
    of a module of the package (`memory` for models/memory.py) living outside the row's
    folders: the row claims what another room holds."""
    modules = {}
    package = os.path.join(root, "xlnet_tf2")
    for directory, _, names in os.walk(package):
        for name in names:
            if name.endswith(".py") and not name.startswith("_"):
                relative = os.path.relpath(os.path.join(directory, name), package)
                modules.setdefault(name[:-3], []).append(relative)
    problems = []
    for row in rows:
        folders = [item.removeprefix("xlnet_tf2/") for item in re.findall(r"`([^`]+/)`", row[0])
                   if item.startswith("xlnet_tf2/")]
        if not folders:
            continue
        text = re.sub(r"`[^`]*`", " ", row[1])  # named code is checked by the paths test
        for word in sorted(set(re.findall(r"[a-z_]+", text))):
            for stem in (word, word[:-1] if word.endswith("s") else word):
                if stem in NOT_MODULE_NAMES:
                    break
                homes = modules.get(stem, [])
                if homes and not any(h.startswith(tuple(folders)) for h in homes):
                    problems.append(f"{word}: {', '.join(homes)} (the row: {', '.join(folders)})")
                    break
    return problems


def test_a_layout_row_names_only_what_its_rooms_hold():
    """A module named in a Layout row's description lives in that row's folders (the training
    row named memory, which is models/memory.py)."""
    assert misplaced_modules(_table("| where | what |"), ROOT) == []


def test_the_misplaced_module_check_finds_memory_under_training():
    rows = [["`xlnet_tf2/training/`", "the loop, optimizer, memory, strategies"],
            ["`xlnet_tf2/models/`", "the backbone, its memory, generation"]]
    assert misplaced_modules(rows, ROOT) == [
        "memory: models/memory.py (the row: training/)"]
