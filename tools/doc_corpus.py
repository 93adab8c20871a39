"""Natural English text from a Debian package: the Python 3.11 documentation (python3.11-doc).

Calibration and fidelity checks of the precision variants (tools/quantize_model.py), the test
texts of the variant tests and the benchmark workloads (bench/make_workloads.py) take text
from here, so none of them needs anything beside the checkout except a Debian package that
scripts/setup.sh installs (``apt-get install python3.11-doc``: the HTML under
/usr/share/doc/python3.11/html; its licence, the PSF licence, allows redistribution).

API (stable; other tools and tests build on it):

  docs_dir() -> Path           the HTML folder: $TAILCUT_DOCS_DIR, else the installed package;
                               raises DocsNotInstalled (a FileNotFoundError) naming
                               ``apt-get install python3.11-doc`` when neither exists
  paragraphs() -> list[str]    distinct prose <p> paragraphs (>= 12 words, mostly letters, no
                               code), whitespace-normalised, in page order (pages sorted by path)
  sentences() -> list[str]     distinct sentences split from those paragraphs (4..40 words,
                               capitalised, ending in . ? or !): short query-like texts;
                               ordered by sha256(text), like the QQP pool in variant_data.py
  split(texts, part) -> list   the texts of one part, ordered by sha256(text): every text is put
                               in one of 100 buckets by sha256(text) (order- and seed-free), so
                               the parts are disjoint and stable when the corpus grows:
                                 "calibration"  buckets 0..9   (quantization calibration)
                                 "check"        buckets 10..19 (quantize-time validation/fidelity)
                                 "test"         buckets 20..99 (tests, evaluation)
  info() -> dict               package, version, folder and counts, for manifests
  fetch_docs(out_dir)          docs_dir() or, without root, ``apt-get download`` + ``dpkg-deb -x``
                               of the package under out_dir (bench/make_workloads.py)

Parsing the ~500 pages takes ~15 s on one core, so paragraphs() keeps its result in
$XDG_CACHE_HOME/tailcut (default ~/.cache/tailcut), keyed by the folder, the package version,
the pages' sizes and mtimes and PARSER_VERSION; delete it or set TAILCUT_NO_CORPUS_CACHE=1 to
parse afresh.

Plain module beside the tools (no package); depends on the standard library only.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import html.parser
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Iterable

DOCS_PACKAGE = "python3.11-doc"
SYSTEM_DOCS = Path("/usr/share/doc/python3.11/html")
ENV_DOCS_DIR = "TAILCUT_DOCS_DIR"

# Bump when paragraphs()/sentences() would give other texts (invalidates the on-disk cache).
PARSER_VERSION = "1"

N_BUCKETS = 100
PARTS = {
    "calibration": range(0, 10),
    "check": range(10, 20),
    "test": range(20, 100),
}

SENTENCE_WORDS = (4, 40)

INSTALL_HINT = f"install it with `apt-get install {DOCS_PACKAGE}` (scripts/setup.sh does)"


class DocsNotInstalled(FileNotFoundError):
    pass


# --------------------------------------------------------------------------- hashing


def text_hash(text: str) -> int:
    """First 8 bytes of sha256(UTF-8 text), big-endian: the sort key and bucket source."""
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def bucket(text: str) -> int:
    return text_hash(text) % N_BUCKETS


def sha256_texts(texts: Iterable[str]) -> str:
    """Digest of an ordered list of texts (each UTF-8, NUL-terminated); = variant_data.sha256_texts."""
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()


def by_hash(texts: Iterable[str]) -> list[str]:
    return sorted(texts, key=lambda t: (text_hash(t), t))


def split(texts: Iterable[str], part: str) -> list[str]:
    """The texts whose sha256 bucket belongs to ``part``, ordered by sha256 (see module doc)."""
    if part not in PARTS:
        raise ValueError(f"doc_corpus.split: part {part!r} is not one of {', '.join(PARTS)}")
    buckets = PARTS[part]
    return by_hash(t for t in set(texts) if bucket(t) in buckets)


# --------------------------------------------------------------------------- locating the HTML


def docs_dir() -> Path:
    """The python3.11-doc HTML folder ($TAILCUT_DOCS_DIR overrides); DocsNotInstalled if absent."""
    env = os.environ.get(ENV_DOCS_DIR)
    if env:
        path = Path(env)
        if not (path / "index.html").is_file():
            raise DocsNotInstalled(f"${ENV_DOCS_DIR}={env} is not a python3.11-doc HTML folder (no index.html)")
        return path
    if SYSTEM_DOCS.is_dir():
        return SYSTEM_DOCS
    raise DocsNotInstalled(
        f"the Python 3.11 documentation (Debian package {DOCS_PACKAGE}) is not installed at {SYSTEM_DOCS}; "
        f"{INSTALL_HINT}, or point ${ENV_DOCS_DIR} at an unpacked copy of its html folder"
    )


def package_version(html_dir: Path | None = None) -> str | None:
    """The installed package's Debian version (dpkg-query), or the one in an unpacked folder's name."""
    html_dir = html_dir or docs_dir()
    marker = html_dir.parents[4] / "VERSION" if len(html_dir.parents) > 4 else html_dir / "VERSION"  # fetch_docs writes it beside usr/
    if marker.is_file():
        return marker.read_text().strip() or None
    if html_dir.resolve() != SYSTEM_DOCS.resolve():
        return None
    try:
        r = subprocess.run(["dpkg-query", "-W", "-f=${Version}", DOCS_PACKAGE], capture_output=True, text=True)
    except OSError:
        return None
    return r.stdout.strip() or None if r.returncode == 0 else None


def fetch_docs(out_dir: Path) -> tuple[Path, str]:
    """The HTML folder and where it came from: an earlier download under out_dir, the installed
    package, or else `apt-get download` + `dpkg-deb -x` into out_dir/corpus (no root needed)."""
    corpus = out_dir / "corpus"
    unpacked = corpus / "usr" / "share" / "doc" / "python3.11" / "html"
    if unpacked.is_dir():
        return unpacked, f"{DOCS_PACKAGE} unpacked under {corpus}"
    try:
        found = docs_dir()
        return found, f"{DOCS_PACKAGE} {package_version(found) or ''} ({found})".replace("  ", " ")
    except DocsNotInstalled:
        pass
    corpus.mkdir(parents=True, exist_ok=True)
    print(f"doc_corpus: fetching {DOCS_PACKAGE} with apt-get download", file=sys.stderr)
    r = subprocess.run(["apt-get", "download", DOCS_PACKAGE], cwd=corpus, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(
            f"doc_corpus: `apt-get download {DOCS_PACKAGE}` failed:\n{r.stderr.strip()}\n"
            f"Run `apt-get update` (as root) and try again, or {INSTALL_HINT}"
        )
    debs = sorted(corpus.glob(f"{DOCS_PACKAGE}_*.deb"))
    subprocess.run(["dpkg-deb", "-x", str(debs[-1]), str(corpus)], check=True)
    version = debs[-1].name.split("_")[1].replace("%3a", ":")
    (corpus / "VERSION").write_text(version + "\n")
    for deb in debs:
        deb.unlink()
    return unpacked, f"{debs[-1].name} unpacked under {corpus}"


# --------------------------------------------------------------------------- parsing


class _Paragraphs(html.parser.HTMLParser):
    """Text of each <p> element (inline markup flattened), skipping admonition titles."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.paragraphs: list[str] = []
        self._depth = 0
        self._skip = False
        self._buf: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "p":
            cls = dict(attrs).get("class") or ""
            if self._depth == 0:
                self._buf = []
                self._skip = "admonition-title" in cls
            self._depth += 1

    def handle_endtag(self, tag):
        if tag == "p" and self._depth > 0:
            self._depth -= 1
            if self._depth == 0 and not self._skip:
                self.paragraphs.append(" ".join("".join(self._buf).split()))

    def handle_data(self, data):
        if self._depth > 0:
            self._buf.append(data)


def _prose(text: str) -> bool:
    """Real sentences rather than code, tables of symbols or navigation text."""
    if len(text.split()) < 12 or ">>>" in text or "Copyright" in text:
        return False
    chars = [c for c in text if not c.isspace()]
    alpha = sum(c.isalpha() for c in chars)
    return alpha / max(1, len(chars)) >= 0.75 and text[-1] in ".:)?!\"'"


def _pages(html_dir: Path) -> list[Path]:
    out = []
    for page in sorted(html_dir.rglob("*.html")):
        rel = page.relative_to(html_dir).as_posix()
        if not rel.startswith(("_", "genindex", "py-modindex", "search", "whatsnew/changelog")):
            out.append(page)
    return out


def doc_paragraphs(html_dir: Path) -> list[str]:
    """Distinct prose paragraphs of the pages under html_dir, in page order (no cache)."""
    seen: set[str] = set()
    out: list[str] = []
    for page in _pages(html_dir):
        parser = _Paragraphs()
        parser.feed(page.read_text(encoding="utf-8", errors="replace"))
        for p in parser.paragraphs:
            if p not in seen and _prose(p):
                seen.add(p)
                out.append(p)
    return out


# A sentence ends at . ! or ? followed by space and a capital letter or an opening quote or
# bracket; not after common abbreviations or a single capital (initials, "e.g. The").
_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")
_ABBREV = re.compile(r"(?:\b(?:e\.g|i\.e|etc|vs|cf|Mr|Mrs|Dr|St|No|approx|resp|Fig|al)\.|\b[A-Z]\.)$")


def split_sentences(paragraph: str) -> list[str]:
    parts: list[str] = []
    for piece in _SPLIT.split(paragraph):
        if parts and _ABBREV.search(parts[-1]):
            parts[-1] = parts[-1] + " " + piece
        else:
            parts.append(piece)
    return parts


def _sentence_ok(s: str) -> bool:
    words = s.split()
    if not SENTENCE_WORDS[0] <= len(words) <= SENTENCE_WORDS[1]:
        return False
    if not s[0].isupper() or s[-1] not in ".?!" or s.endswith("..."):
        return False
    if s.count("(") != s.count(")") or s.count('"') % 2:
        return False
    chars = [c for c in s if not c.isspace()]
    return sum(c.isalpha() for c in chars) / max(1, len(chars)) >= 0.8


# --------------------------------------------------------------------------- cached corpus


def _cache_file(html_dir: Path) -> Path | None:
    if os.environ.get("TAILCUT_NO_CORPUS_CACHE"):
        return None
    digest = hashlib.sha256()
    digest.update(f"{PARSER_VERSION}\0{html_dir.resolve()}\0{package_version(html_dir)}\0".encode())
    for page in _pages(html_dir):
        st = page.stat()
        digest.update(f"{page.relative_to(html_dir)}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tailcut"
    return base / f"doc_corpus-{digest.hexdigest()[:20]}.json.gz"


@functools.lru_cache(maxsize=4)
def _paragraphs_of(html_dir: Path) -> tuple[str, ...]:
    cache = _cache_file(html_dir)
    if cache is not None and cache.is_file():
        try:
            with gzip.open(cache, "rt", encoding="utf-8") as fh:
                return tuple(json.load(fh))
        except (OSError, ValueError):
            pass
    out = doc_paragraphs(html_dir)
    if cache is not None:
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache.with_name(f"{cache.name}.{os.getpid()}.tmp")
            with gzip.open(tmp, "wt", encoding="utf-8") as fh:
                json.dump(out, fh, ensure_ascii=False)
            os.replace(tmp, cache)
        except OSError:
            pass  # a read-only home only costs the parse next time
    return tuple(out)


def paragraphs(html_dir: Path | None = None) -> list[str]:
    """Distinct prose paragraphs of the documentation, in page order (see module doc)."""
    return list(_paragraphs_of(html_dir or docs_dir()))


@functools.lru_cache(maxsize=4)
def _sentences_of(html_dir: Path) -> tuple[str, ...]:
    seen: set[str] = set()
    for p in _paragraphs_of(html_dir):
        for s in split_sentences(p):
            if s not in seen and _sentence_ok(s):
                seen.add(s)
    return tuple(by_hash(seen))


def sentences(html_dir: Path | None = None) -> list[str]:
    """Distinct short sentences split from paragraphs(), ordered by sha256 (see module doc)."""
    return list(_sentences_of(html_dir or docs_dir()))


def info(html_dir: Path | None = None) -> dict:
    html_dir = html_dir or docs_dir()
    return {
        "package": DOCS_PACKAGE,
        "package_version": package_version(html_dir),
        "html_dir": str(html_dir),
        "parser_version": PARSER_VERSION,
        "paragraphs": len(_paragraphs_of(html_dir)),
        "sentences": len(_sentences_of(html_dir)),
        "split": {part: f"sha256(text) mod {N_BUCKETS} in {r.start}..{r.stop - 1}" for part, r in PARTS.items()},
    }


if __name__ == "__main__":
    d = info()
    print(json.dumps(d, indent=2))
    for part in PARTS:
        print(part, len(split(sentences(), part)), "sentences,", len(split(paragraphs(), part)), "paragraphs")
