"""A corpus of documentation prose found on the machine, for benchmarks on text never seen.

Sources, each read in a fixed order (sorted paths); the next document always comes from the
source with the least text so far, so the corpus holds them in equal parts (until one runs
out) and every part of it mixes them:

* "man": English man pages (/usr/share/man/man1..man8) rendered as text by groff;
* "info": GNU info manuals (/usr/share/info);
* "doc": the text files Debian packages ship in /usr/share/doc (README, NEWS, changelogs,
  copyright, *.txt, *.md, *.rst; plain or gzip);
* "python": the installed Python packages (site-packages): docstrings (parsed with `ast`,
  never imported) and their .md / .rst files.

Every paragraph is whitespace-normalized and kept only the first time it appears in the whole
corpus (licences, boilerplate and changelog lines recur across packages); a paragraph must
look like prose (`_is_prose`). Kept paragraphs are cut into sentences, one per line, a blank
line after each document: the pretraining input format.

`build_doc_corpus` writes two disjoint files: the benchmarked text and a held-out slice for
training the SentencePiece model (chosen by a hash of each document's name), so the model
never saw the text it encodes and no paragraph is in both. Nothing is downloaded.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import shutil
import subprocess
import sysconfig
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from xlnet_tf2.prep.docstring_corpus import SENTENCE_END, docstrings

SOURCES = ("man", "info", "doc", "python")
# A document: (name, paragraphs); a paragraph is its lines joined by single spaces.
Document = Tuple[str, List[str]]

_MIN_SENTENCE_CHARS = 20
_DOC_NAMES = re.compile(r"^(readme|news|changelog|changes|copyright|todo|thanks|authors|"
                        r"faq|history|bugs)([._-].*)?$|\.(txt|md|rst)(\.gz)?$", re.IGNORECASE)
_BULLET = re.compile(r"^\s*([*+\-\u2022]|\d+[.)])\s+")
_MARKUP = re.compile(r"[`*_#|<>{}\[\]=\\();@]")


def _read_text(path: str) -> Optional[str]:
    """The file's text (gunzipped if .gz), or None if it is not UTF-8 text."""
    try:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rb") as f:
            data = f.read()
        if b"\x00" in data:
            return None
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError, EOFError):
        return None


def _paragraphs(text: str) -> List[str]:
    """Blank-line separated blocks of `text`, each joined into one line with single spaces;
    a bullet ("* ", "- ", "1. ") starts a new paragraph (changelogs and lists)."""
    out: List[str] = []
    current: List[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or _BULLET.match(line):
            if current:
                out.append(" ".join(current))
            current = []
            stripped = _BULLET.sub("", line).strip()
        if stripped:
            current.append(" ".join(stripped.split()))
    if current:
        out.append(" ".join(current))
    return out


def _is_prose(paragraph: str) -> bool:
    """Mostly words: at least 4 of them, letters and spaces at least 80% of the characters,
    and little markup (code, tables, option lists and rules fail)."""
    if len(paragraph) < _MIN_SENTENCE_CHARS or len(paragraph.split()) < 4:
        return False
    letters = sum(c.isalpha() or c == " " for c in paragraph)
    return (letters >= 0.8 * len(paragraph)
            and len(_MARKUP.findall(paragraph)) <= 0.03 * len(paragraph))


def _man_pages(root: str) -> List[str]:
    pages = []
    for section in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        if re.fullmatch(r"man[1-8]", section):
            folder = os.path.join(root, section)
            pages.extend(os.path.join(folder, f) for f in sorted(os.listdir(folder)))
    return pages


def _render_man(path: str) -> Optional[str]:
    """A man page as plain text without its header and footer lines: groff with one line
    per paragraph (a very long line length), no hyphenation, no bold/underline overstrikes."""
    text = _read_text(path)
    if text is None or text.lstrip().startswith(".so "):  # a link to another page
        return None
    try:
        result = subprocess.run(["groff", "-man", "-Tutf8", "-P-cbou", "-rLL=4000n",
                                 "-rHY=0", "-t"], input=text.encode(), capture_output=True,
                                timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if result.returncode:
        return None
    lines = result.stdout.decode("utf-8", "replace").splitlines()
    filled = [i for i, line in enumerate(lines) if line.strip()]
    return "\n".join(lines[filled[0] + 1:filled[-1]]) if len(filled) > 2 else None


def iter_man_documents(root: str = "/usr/share/man", workers: int = 2) -> Iterator[Document]:
    """(name, paragraphs) of each English man page, rendered `workers` pages at a time; none
    if groff is missing."""
    if shutil.which("groff") is None:
        return
    pages = _man_pages(root)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for start in range(0, len(pages), 64):
            batch = pages[start:start + 64]
            for path, text in zip(batch, pool.map(_render_man, batch)):
                if text:
                    yield os.path.relpath(path, root), _paragraphs(text)


def iter_info_documents(root: str = "/usr/share/info") -> Iterator[Document]:
    """(name, paragraphs) of each info manual (node separators and menus dropped)."""
    for name in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        if ".info" not in name:
            continue
        text = _read_text(os.path.join(root, name))
        if text:
            text = re.sub(r"\x1f\n?File: [^\n]*\n", "\n\n", text)
            yield name, _paragraphs(text)


def iter_debian_doc_documents(root: str = "/usr/share/doc") -> Iterator[Document]:
    """(name, paragraphs) of each text file Debian packages ship in `root`."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for f in sorted(filenames):
            if _DOC_NAMES.search(f):
                text = _read_text(os.path.join(dirpath, f))
                if text:
                    yield os.path.relpath(os.path.join(dirpath, f), root), _paragraphs(text)


def iter_python_documents(root: Optional[str] = None) -> Iterator[Document]:
    """(name, paragraphs) of each module's docstrings and each .md / .rst file of the
    installed packages in `root` (default: this interpreter's site-packages)."""
    root = root or sysconfig.get_paths()["purelib"]
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for f in sorted(filenames):
            path = os.path.join(dirpath, f)
            if f.endswith(".py"):
                paragraphs = [p for doc in docstrings(path) for p in _paragraphs(doc)]
            elif f.endswith((".md", ".rst")):
                paragraphs = _paragraphs(_read_text(path) or "")
            else:
                continue
            if paragraphs:
                yield os.path.relpath(path, root), paragraphs


def _balanced(iterators: Dict[str, Iterator[Document]],
              written: Dict[str, int]) -> Iterator[Tuple[str, Document]]:
    """(source, document), always from the live source with the fewest bytes `written` so far
    (the caller updates it), so each source gets an equal share until it runs out."""
    live = dict(iterators)
    while live:
        source = min(live, key=lambda s: written[s])
        try:
            yield source, next(live[source])
        except StopIteration:
            del live[source]


def _sentences(paragraph: str) -> List[str]:
    return [s.strip() for s in SENTENCE_END.split(paragraph)
            if len(s.strip()) >= _MIN_SENTENCE_CHARS]


def is_held_out(name: str, fraction: float) -> bool:
    """Whether document `name` goes to the SentencePiece slice (a hash below fraction)."""
    digest = hashlib.sha256(f"spm:{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big") < fraction * 2.0 ** 64


def build_doc_corpus(output_path: str, spm_path: str, *, max_bytes: int,
                     spm_fraction: float = 0.2, max_spm_bytes: int = 8_000_000,
                     sources: Sequence[str] = SOURCES, min_bytes: int = 0,
                     roots: Optional[Dict[str, str]] = None,
                     exclude: Optional[Callable[[str, str], bool]] = None) -> dict:
    """Writes a deduplicated documentation corpus and a disjoint slice to train a tokenizer.

    Args:
      output_path: the benchmarked text (pretraining input format); writing stops after the
        first document that brings it to `max_bytes`.
      spm_path: the SentencePiece training text: the documents `is_held_out(name,
        spm_fraction)` picks, up to `max_spm_bytes` (then they are skipped, not benchmarked).
      sources: which of SOURCES to read.
      min_bytes: raise ValueError if the machine yields less benchmarked text.
      roots: optional {source: directory} overriding each source's default location.
      exclude: optional `exclude(source, name)`: True leaves that document out (e.g. the
        documents of a downstream task, benchmarks/tools/payoff_tasks.py).

    Returns:
      {"path", "spm_path", "bytes", "spm_bytes", "documents", "sentences",
       "duplicate_paragraphs", "by_source": {source: bytes}}.
    """
    unknown = set(sources) - set(SOURCES)
    if unknown:
        raise ValueError(f"unknown corpus sources {sorted(unknown)}; choose from {SOURCES}.")
    roots = dict(roots or {})
    readers: Dict[str, Callable[..., Iterator[Document]]] = {
        "man": iter_man_documents, "info": iter_info_documents,
        "doc": iter_debian_doc_documents, "python": iter_python_documents}
    iterators = {s: readers[s](roots[s]) if s in roots else readers[s]() for s in sources}
    seen = set()
    stats = {"path": output_path, "spm_path": spm_path, "bytes": 0, "spm_bytes": 0,
             "documents": 0, "sentences": 0, "duplicate_paragraphs": 0,
             "excluded_documents": 0,
             "by_source": {s: 0 for s in sources}}
    for path in (output_path, spm_path):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(output_path, "w", encoding="utf-8") as out, \
            open(spm_path, "w", encoding="utf-8") as spm_out:
        for source, (name, paragraphs) in _balanced(iterators, stats["by_source"]):
            if exclude is not None and exclude(source, name):
                stats["excluded_documents"] += 1
                continue
            held_out = is_held_out(f"{source}:{name}", spm_fraction)
            if held_out and stats["spm_bytes"] >= max_spm_bytes:
                continue
            lines = []
            for paragraph in paragraphs:
                key = hashlib.blake2b(paragraph.encode(), digest_size=12).digest()
                if key in seen:
                    stats["duplicate_paragraphs"] += 1
                    continue
                seen.add(key)
                if _is_prose(paragraph):
                    lines.extend(_sentences(paragraph))
            if len(lines) < 2:
                continue
            block = "\n".join(lines) + "\n\n"
            size = len(block.encode("utf-8"))
            if held_out:
                spm_out.write(block)
                stats["spm_bytes"] += size
                continue
            out.write(block)
            stats["bytes"] += size
            stats["documents"] += 1
            stats["sentences"] += len(lines)
            stats["by_source"][source] += size
            if stats["bytes"] >= max_bytes:
                break
    if stats["bytes"] < min_bytes:
        raise ValueError(f"The machine's documentation ({', '.join(sources)}) gave only "
                         f"{stats['bytes']} bytes of new text, less than {min_bytes}.")
    return stats
