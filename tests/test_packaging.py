"""The package as pip installs it: pyproject.toml declares what the library imports (runtime
dependencies, and extras for what it imports only when asked), requirements*.txt pin sets
inside those ranges, every command has a console script beside its script file, and a wheel
built from the checkout declares all of that; pip's resolver finds its dependencies in this
environment without an index; installed into a fresh virtual environment outside the checkout
(its dependencies taken from this environment, nothing downloaded) it imports and runs a
model, and each console script answers `--help` with the flags of its script file, refuses a
bad flag with the same one line and does its work."""

from __future__ import annotations

import ast
import importlib.metadata
import os
import random
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from fixtures.paths import REPO_ROOT

ROOT = Path(REPO_ROOT)
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PROJECT = PYPROJECT["project"]
SCRIPTS = PROJECT["scripts"]
# The extras with a pinned requirements file that scripts/setup_env.sh installs (EXTRA=...).
PINNED_EXTRAS = {"test": "requirements-test.txt", "reference": "requirements-reference.txt"}
COMMANDS = ROOT / "xlnet_tf2" / "commands"
SCRIPT_FOLDERS = ("experiments", "data_prep")
TF_NOISE = re.compile(r"^[IWEF]\d{4} |oneDNN|cuda|cuInit|cuDNN|TensorRT|InitializeLog|"
                      r"cpu_feature_guard|This TensorFlow binary", re.IGNORECASE | re.MULTILINE)


def _requirements(strings):
    """{canonical name: Requirement} of requirement strings (one per name)."""
    found = {}
    for text in strings:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        assert name not in found, f"{name} is listed twice"
        found[name] = requirement
    return found


def _pins(filename):
    """{canonical name: pinned version} of a requirements file (every line `name==version`)."""
    lines = [line.split("#", 1)[0].strip()
             for line in (ROOT / filename).read_text(encoding="utf-8").splitlines()]
    pins = {}
    for name, requirement in _requirements(line for line in lines if line).items():
        specifiers = list(requirement.specifier)
        assert len(specifiers) == 1 and specifiers[0].operator == "==", (
            f"{filename}: {requirement} is not pinned with ==")
        pins[name] = specifiers[0].version
    return pins


RUNTIME = _requirements(PROJECT["dependencies"])
EXTRAS = {extra: _requirements(strings)
          for extra, strings in PROJECT["optional-dependencies"].items()}


def test_requirements_files_pin_what_pyproject_declares():
    runtime_pins = _pins("requirements.txt")
    for name, requirement in RUNTIME.items():
        assert name in runtime_pins, f"requirements.txt does not pin {name}"
        assert requirement.specifier.contains(runtime_pins[name]), (
            f"requirements.txt pins {name}=={runtime_pins[name]}, outside {requirement}")
    optional = {name: extra for extra, names in EXTRAS.items() for name in names}
    for name, version in runtime_pins.items():  # beyond the runtime: only an extra's package
        if name in RUNTIME:
            continue
        assert name in optional and optional[name] not in PINNED_EXTRAS, (
            f"requirements.txt pins {name}, which the library does not need; it belongs in "
            "the requirements file of its extra")
        assert EXTRAS[optional[name]][name].specifier.contains(version), name
    for extra, filename in PINNED_EXTRAS.items():
        pins = _pins(filename)
        for name, requirement in EXTRAS[extra].items():
            assert name in pins, f"{filename} does not pin {name} of the {extra!r} extra"
            assert requirement.specifier.contains(pins[name]), (
                f"{filename} pins {name}=={pins[name]}, outside {requirement}")
    # The test tools are no runtime dependency.
    assert not set(EXTRAS["test"]) & (set(RUNTIME) | set(runtime_pins))
    assert {"pytest", "pytest-xdist", "import-linter"} <= set(EXTRAS["test"])


BUILDS = {"tensorflow-tpu": "tensorflow"}
# Declared, never imported by the library: TensorFlow's own dependency, declared in TensorFlow's
# range so that requirements.txt can pin the version (its reason there).
PINNED_FOR_TENSORFLOW = {"ml-dtypes"}


def _imported_only_inside_functions():
    """The kernel modules (layers/kernels/: device forms, xlnet_tf2/layers/kernels/__init__.py)
    that no module of xlnet_tf2 imports at its top: each is imported inside a function only,
    when a step traced for its device uses it, and may import its extra at its own top. (Not
    the modules the package's lazy names import: a user's attribute access imports those.)"""
    at_top = set()
    for path in sorted((ROOT / "xlnet_tf2").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
        for node in tree.body:  # the module's top level
            if isinstance(node, ast.Import):
                at_top |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1]
                                    + ([base] if base else []))
                at_top |= {base} | {f"{base}.{alias.name}" for alias in node.names}
    files = {".".join(p.relative_to(ROOT).with_suffix("").parts): str(p.relative_to(ROOT))
             for p in (ROOT / "xlnet_tf2" / "layers" / "kernels").glob("*.py")
             if p.name != "__init__.py"}
    return {path for module, path in files.items() if module not in at_top}


def _third_party_imports():
    """{top-level module: {(path, inside a function)}} of what xlnet_tf2 imports outside the
    standard library and itself."""
    found = {}
    for path in sorted((ROOT / "xlnet_tf2").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        inside = {id(node) for function in ast.walk(tree)
                  if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
                  for node in ast.walk(function)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top != "xlnet_tf2" and top not in sys.stdlib_module_names:
                    found.setdefault(top, set()).add(
                        (str(path.relative_to(ROOT)), id(node) in inside))
    return found


def test_the_library_declares_what_it_imports():
    """Every third-party import of xlnet_tf2 is a declared dependency, one an extra provides
    is imported only inside a function (the library imports without it), and every runtime
    dependency is imported."""
    providers = importlib.metadata.packages_distributions()
    optional = {name for names in EXTRAS.values() for name in names}
    lazy = _imported_only_inside_functions()
    used = set()
    for module, places in sorted(_third_party_imports().items()):
        # The TPU build (README: the install on a Cloud TPU) provides the `tensorflow` package.
        names = {BUILDS.get(n, n) for n in map(canonicalize_name, providers.get(module, []))}
        assert names, f"{module} (imported by {sorted(places)}) is not installed here"
        if names & set(RUNTIME):
            used |= names & set(RUNTIME)
            continue
        assert names & optional, (f"{module} (imported by {sorted(places)}) comes from "
                                  f"{sorted(names)}, which pyproject.toml does not declare")
        # At a module's top only where the package imports that module inside functions alone.
        at_top = sorted(path for path, inside in places if not inside and path not in lazy)
        assert not at_top, f"{module} is optional ({sorted(names)}) but imported by {at_top}"
    assert used | PINNED_FOR_TENSORFLOW == set(RUNTIME), (
        f"declared but never imported: {set(RUNTIME) - used - PINNED_FOR_TENSORFLOW}")
    assert not used & PINNED_FOR_TENSORFLOW, "imported now: drop it from PINNED_FOR_TENSORFLOW"


def _script_of(module):
    """The script file of a command module (experiments/<name>.py or data_prep/<name>.py)."""
    found = [ROOT / folder / f"{module}.py" for folder in SCRIPT_FOLDERS
             if (ROOT / folder / f"{module}.py").is_file()]
    assert len(found) == 1, f"xlnet_tf2/commands/{module}.py has script files {found}"
    return found[0]


def test_every_command_has_a_console_script_and_a_script_file():
    modules = sorted(p.stem for p in COMMANDS.glob("*.py") if p.stem != "__init__")
    assert sorted(target.split(":")[0] for target in SCRIPTS.values()) == [
        f"xlnet_tf2.commands.{m}" for m in modules]
    assert len(modules) >= 10, modules
    for name, target in SCRIPTS.items():
        module, function = target.split(":")
        assert re.fullmatch(r"xlnet(-[a-z]+)+", name) and function == "main", name
        source = (COMMANDS / f"{module.rsplit('.', 1)[1]}.py").read_text(encoding="utf-8")
        assert "\ndef main() -> None:\n" in source, module
        assert name in ast.get_docstring(ast.parse(source)), f"{module}'s usage lacks {name}"
        script = _script_of(module.rsplit(".", 1)[1]).read_text(encoding="utf-8")
        assert f"from {module} import main\n" in script, script
        assert script.rstrip().endswith('if __name__ == "__main__":\n    main()'), script
        # No usage of its own: --help from a checkout prints the command module's (cli.run).
        assert ast.get_docstring(ast.parse(script)) is None, script


def _setup_env_pip_calls(tmp_path, extra):
    """The pip command lines scripts/setup_env.sh runs with EXTRA=`extra` (None: unset), in a
    copy of the scripts whose .venv/bin/python only records its arguments; (status, calls)."""
    work = tmp_path / f"extra_{extra}"
    (work / "scripts").mkdir(parents=True)
    shutil.copy2(ROOT / "scripts" / "setup_env.sh", work / "scripts")
    for path in ROOT.glob("requirements*.txt"):
        shutil.copy2(path, work)
    (work / ".venv" / "bin").mkdir(parents=True)
    fake = work / ".venv" / "bin" / "python"
    fake.write_text(f'#!/bin/sh\necho "$*" >> "{work}/calls"\n', encoding="utf-8")
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "EXTRA"}
    if extra is not None:
        env["EXTRA"] = extra
    run = subprocess.run(["bash", "scripts/setup_env.sh"], cwd=work, env=env,
                         capture_output=True, text=True, timeout=60)
    calls = (work / "calls").read_text().splitlines() if (work / "calls").exists() else []
    return run.returncode, calls


def test_setup_env_installs_the_pins_then_the_package_with_its_extras(tmp_path):
    """The README's two commands: run_demo.sh's set-up installs requirements.txt and the
    package; run_tests.sh's also the test tools and the reference, and the package with those
    extras (pip then checks the pins against the ranges: no --no-deps)."""
    extra = re.search(r"^EXTRA=(\S+) bash scripts/setup_env.sh$",
                      (ROOT / "scripts" / "run_tests.sh").read_text(), re.M).group(1)
    assert "bash scripts/setup_env.sh" in (ROOT / "scripts" / "run_demo.sh").read_text()
    assert _setup_env_pip_calls(tmp_path, None) == (0, [
        "-m pip install --quiet --upgrade pip",
        "-m pip install --quiet -r requirements.txt",
        "-m pip install --quiet -e ."])
    assert _setup_env_pip_calls(tmp_path, extra) == (0, [
        "-m pip install --quiet --upgrade pip",
        "-m pip install --quiet -r requirements.txt -r requirements-test.txt "
        "-r requirements-reference.txt",
        "-m pip install --quiet -e .[test,reference]"])
    assert _setup_env_pip_calls(tmp_path, "speed") == (2, [])


# ------------------------------------------------------------------- the wheel, installed
def _environment(**changes):
    """os.environ without what would put the checkout or another environment on the path."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "TF_CPP_MIN_LOG_LEVEL")}
    env.update(changes)
    return env


def _package_files(root):
    return sorted(str(p.relative_to(root)) for p in (root / "xlnet_tf2").rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """A wheel of the checkout, built without build isolation (setuptools of this
    environment; no download) from a copy of what the build reads, so the checkout gets no
    build/ or egg-info folders."""
    work = tmp_path_factory.mktemp("packaging")
    source = work / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(ROOT / "xlnet_tf2", source / "xlnet_tf2",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    run = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--no-index", "--quiet", "--wheel-dir", str(work / "wheels"), str(source)],
        capture_output=True, text=True, env=_environment(), cwd=work, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    wheels = list((work / "wheels").glob("xlnet_tf2-*.whl"))
    assert len(wheels) == 1, wheels
    print(f"\nwheel: {wheels[0].name}, {wheels[0].stat().st_size} bytes")
    return wheels[0]


def _wheel_text(wheel, member):
    with zipfile.ZipFile(wheel) as archive:
        [name] = [n for n in archive.namelist() if n.endswith(".dist-info/" + member)]
        return archive.read(name).decode("utf-8")


@pytest.mark.slow
def test_wheel_declares_dependencies_extras_and_console_scripts(wheel):
    metadata = _wheel_text(wheel, "METADATA")
    requires = [line.split(":", 1)[1].strip() for line in metadata.splitlines()
                if line.startswith("Requires-Dist:")]
    print("Requires-Dist:\n  " + "\n  ".join(requires))
    runtime = [Requirement(r) for r in requires if "extra ==" not in r]
    assert {canonicalize_name(r.name): r.specifier for r in runtime} == {
        name: r.specifier for name, r in RUNTIME.items()}
    assert all(r.marker is None for r in runtime)
    extras = {line.split(":", 1)[1].strip() for line in metadata.splitlines()
              if line.startswith("Provides-Extra:")}
    assert extras == set(EXTRAS) and {"test", "reference"} <= extras
    for extra, declared in EXTRAS.items():
        listed = {canonicalize_name(r.name): r.specifier for r in map(Requirement, requires)
                  if r.marker is not None and r.marker.evaluate({"extra": extra})}
        assert listed == {name: r.specifier for name, r in declared.items()}, extra
    entry_points = _wheel_text(wheel, "entry_points.txt")
    section = entry_points.split("[console_scripts]", 1)[1].split("\n[", 1)[0]
    listed = dict(line.split(" = ") for line in section.strip().splitlines())
    assert listed == SCRIPTS
    with zipfile.ZipFile(wheel) as archive:
        files = sorted(n for n in archive.namelist() if n.startswith("xlnet_tf2/"))
    # Every file of the package (a folder without __init__.py would be left out silently);
    # nothing of tests/, experiments/ or data_prep/.
    assert files == _package_files(ROOT)


def _new_venv(venv):
    """A fresh virtual environment without pip whose path reaches this environment's
    site-packages for the dependencies (a .pth file: the .pth files there, an editable
    install of the checkout among them, are not run). Returns its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120, env=_environment())
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True, env=_environment()).stdout.strip()
    here = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    Path(purelib, "dependencies_of_the_test_environment.pth").write_text(
        "\n".join(sorted(here)) + "\n", encoding="utf-8")
    return python


def _pip(python, *args, cwd):
    """This environment's pip acting on another environment (pip's --python)."""
    return subprocess.run([sys.executable, "-m", "pip", "--python", str(python), *args],
                          capture_output=True, text=True, env=_environment(), cwd=cwd,
                          timeout=300)


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory):
    """A fresh virtual environment (`_new_venv`) with the wheel installed: no dependencies
    resolved, no index."""
    work = tmp_path_factory.mktemp("venv")
    python = _new_venv(work / "venv")
    run = _pip(python, "install", "--no-deps", "--no-index", "--quiet", str(wheel), cwd=work)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return work / "venv"


def _help_flags(output, program):
    """The flags part of absl's --help output, the program's heading made neutral."""
    assert "\nflags:\n" in output, output[-2000:]
    return output.split("\nflags:\n", 1)[1].replace(f"\n{program}:\n", "\nPROGRAM:\n", 1)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_installed_console_script_answers_help_like_its_script(installed, name, tmp_path):
    command = installed / "bin" / name
    run = subprocess.run([str(command), "--help"], capture_output=True, text=True,
                         cwd=tmp_path, env=_environment(), timeout=120)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    assert run.stderr == "", run.stderr[-3000:]  # no traceback, no TensorFlow start-up lines
    module = SCRIPTS[name].split(":")[0].rsplit(".", 1)[1]
    usage = ast.get_docstring(ast.parse((COMMANDS / f"{module}.py").read_text("utf-8")))
    assert run.stdout.startswith(usage.splitlines()[0]), run.stdout[:500]
    assert re.search(rf"\n\s*{name} --", run.stdout), run.stdout[:1500]  # its usage example
    script = _script_of(module)
    relative = str(script.relative_to(ROOT))
    from_checkout = subprocess.run(
        [sys.executable, relative, "--help"], capture_output=True, text=True, cwd=ROOT,
        env=_environment(PYTHONPATH=str(ROOT)), timeout=120)
    assert from_checkout.returncode == 0, from_checkout.stderr[-3000:]
    assert _help_flags(run.stdout, str(command)) == _help_flags(from_checkout.stdout, relative)
    # A bad command line: the same one line under the command's own name, the same status.
    bad = subprocess.run([str(command), "--no_such_flag=1"], capture_output=True, text=True,
                         cwd=tmp_path, env=_environment(), timeout=120)
    bad_from_checkout = subprocess.run(
        [sys.executable, relative, "--no_such_flag=1"], capture_output=True, text=True,
        cwd=ROOT, env=_environment(PYTHONPATH=str(ROOT)), timeout=120)
    assert bad.returncode == bad_from_checkout.returncode == 2, bad.stderr[-3000:]
    assert bad.stderr.startswith(f"{name}: error: ") and len(bad.stderr.splitlines()) == 1, (
        bad.stderr[-3000:])
    assert bad.stderr.replace(name, script.name) == bad_from_checkout.stderr


@pytest.mark.slow
def test_installed_package_imports_and_runs_outside_the_checkout(installed, tmp_path):
    """`import xlnet_tf2` finds the installed package (the checkout is not on the path),
    without TensorFlow; a tiny model runs."""
    script = (
        "import sys\n"
        "import xlnet_tf2\n"
        "print('module', xlnet_tf2.__file__)\n"
        "print('tensorflow after import', 'tensorflow' in sys.modules)\n"
        "import numpy as np\n"
        "model = xlnet_tf2.XLNetLMHeadModel(xlnet_tf2.XLNetConfig.preset('tiny'))\n"
        "out = model({'input_ids': np.array([[10, 11, 12, 13, 14]], np.int32)})\n"
        "print('logits', tuple(out['logits'].shape), bool(np.isfinite(out['logits']).all()))\n")
    run = subprocess.run([str(installed / "bin" / "python"), "-c", script],
                         capture_output=True, text=True, cwd=tmp_path,
                         env=_environment(TF_CPP_MIN_LOG_LEVEL="2"), timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    lines = run.stdout.splitlines()
    module = next(line.split(" ", 1)[1] for line in lines if line.startswith("module "))
    assert Path(module).is_relative_to(installed), module
    assert "tensorflow after import False" in lines
    assert "logits (1, 5, 1000) True" in lines, run.stdout[-2000:]


@pytest.mark.slow
@pytest.mark.plain_wheel  # under tensorflow-tpu, pip would put the plain wheel over it
def test_wheel_dependencies_resolve_from_the_pinned_environment(wheel, tmp_path):
    """pip's resolver, with no index, finds the wheel's dependencies and those of every extra
    (and theirs) already installed here (requirements*.txt's pins): into a fresh environment
    it would install the wheel and nothing else."""
    extras = ",".join(sorted(EXTRAS))
    python = _new_venv(tmp_path / "venv")
    run = _pip(python, "install", "--dry-run", "--no-index", f"{wheel}[{extras}]",
               cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    would = [line for line in run.stdout.splitlines() if line.startswith("Would install")]
    assert would == [f"Would install xlnet-tf2-{PROJECT['version']}"], run.stdout[-3000:]


@pytest.mark.slow
def test_installed_console_script_does_its_work_outside_the_checkout(installed, tmp_path):
    """xlnet-train-sentencepiece, started from a folder of its own, trains a model with the
    special pieces where XLNet wants them."""
    rng = random.Random(0)
    words = ("sort the list in place return a new sorted copy of items keep order stable when "
             "keys compare equal read write file lines open close buffer text bytes").split()
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(" ".join(rng.choice(words) for _ in range(12)).capitalize() +
                              ".\n" for _ in range(300)), encoding="utf-8")
    run = subprocess.run(
        [str(installed / "bin" / "xlnet-train-sentencepiece"), "--input=corpus.txt",
         "--vocab_size=80", "--model_prefix=out/sp"],
        capture_output=True, text=True, cwd=tmp_path, env=_environment(), timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    assert run.stderr == "", run.stderr[-3000:]
    assert run.stdout == "Wrote out/sp.model (80 pieces).\n"
    import sentencepiece

    model = sentencepiece.SentencePieceProcessor(model_file=str(tmp_path / "out" / "sp.model"))
    assert model.get_piece_size() == 80
    assert [model.id_to_piece(i) for i in range(9)] == [
        "<unk>", "<s>", "</s>", "<cls>", "<sep>", "<pad>", "<mask>", "<eod>", "<eop>"]


@pytest.mark.slow
def test_installed_create_tfrecords_names_itself_for_a_misspelled_flag(installed, tmp_path):
    """The flags it does not know go to Apache Beam; one Beam does not know either is an
    error that names the console script (the script file's names the script)."""
    (tmp_path / "corpus.txt").write_text("One line of text.\n", encoding="utf-8")
    run = subprocess.run(
        [str(installed / "bin" / "xlnet-create-tfrecords"), "--input=corpus.txt",
         "--output_dir=out", "--eval_fractoin=0.1"],
        capture_output=True, text=True, cwd=tmp_path, env=_environment(), timeout=300)
    assert (run.returncode, run.stderr.strip()) == (2, (
        "xlnet-create-tfrecords: error: unknown flag --eval_fractoin=0.1: neither a flag of "
        "xlnet-create-tfrecords nor an Apache Beam pipeline option. Check the spelling "
        "(xlnet-create-tfrecords --help lists its flags)."))
    assert not (tmp_path / "out").exists()
