"""Shared pytest helpers for tests/python: where the repository, model, build and data live.

Every location can be overridden by an environment variable so CI and developers can point the
tests at other folders:
  TAILCUT_MODEL_DIR  the model folder  (default <repo>/models/all-MiniLM-L6-v2)
  TAILCUT_BUILD_DIR  the CMake build   (default <repo>/build)
  TAILCUT_TEST_TIME_SCALE  how much slower than the optimised build the server under test is
                     (default 1; scripts/ci_sanitizers.sh sets it for the ASan and TSan builds):
                     scales the few allowances that are about timing, never what is checked
  TAILCUT_TEST_SANITIZER  asan or tsan when the server under test is a sanitizer build (set by
                     scripts/ci_sanitizers.sh): memory-growth bounds are not checked there
  TAILCUT_SHARED_DATA  the folder holding the optional shared data sets (qqp/pairs.jsonl.gz, the
                     labelled Quora Question Pairs), default <repo>/../shared/data. The few tests
                     that need the QQP data (tokenizer parity on real questions, accuracy checks)
                     skip without it, saying where they looked; with TAILCUT_REQUIRE_SHARED_DATA=1
                     (.ci/run sets it) its absence fails them instead.
Tests that only need realistic texts (the sample_texts fixture) take sentences from the Python
documentation that Debian's python3.11-doc package installs (tools/doc_corpus.py).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


def model_dir() -> Path:
    return Path(os.environ.get("TAILCUT_MODEL_DIR") or REPO_ROOT / "models" / "all-MiniLM-L6-v2")


def build_dir() -> Path:
    return Path(os.environ.get("TAILCUT_BUILD_DIR") or REPO_ROOT / "build")


def time_scale() -> float:
    return float(os.environ.get("TAILCUT_TEST_TIME_SCALE") or 1.0)


SHARED_DATA_ENV = "TAILCUT_SHARED_DATA"
REQUIRE_SHARED_DATA_ENV = "TAILCUT_REQUIRE_SHARED_DATA"
QQP_PAIRS = Path("qqp") / "pairs.jsonl.gz"


def shared_data_dir() -> Path:
    """The optional shared data sets: $TAILCUT_SHARED_DATA, default <repo>/../shared/data."""
    return Path(os.environ.get(SHARED_DATA_ENV) or REPO_ROOT.parent / "shared" / "data")


def shared_data_required() -> bool:
    """TAILCUT_REQUIRE_SHARED_DATA=1: missing shared data fails the tests that need it."""
    return os.environ.get(REQUIRE_SHARED_DATA_ENV, "").strip().lower() in ("1", "true", "yes")


def qqp_pairs_path() -> Path:
    return shared_data_dir() / QQP_PAIRS


def require_shared_data(relative: Path | str = QQP_PAIRS, what: str = "QQP pairs") -> Path:
    """The shared data file `relative` (under shared_data_dir()). Absent, the calling test (or
    every test using the calling fixture) is skipped with a message naming the path and the
    variables, or fails when TAILCUT_REQUIRE_SHARED_DATA=1 (CI: never skipped silently)."""
    path = shared_data_dir() / relative
    if path.is_file():
        return path
    where = (f"{SHARED_DATA_ENV}={os.environ[SHARED_DATA_ENV]}" if os.environ.get(SHARED_DATA_ENV)
             else f"{SHARED_DATA_ENV} unset, default <repo>/../shared/data")
    message = f"{what} not found at {path} ({where})"
    if shared_data_required():
        pytest.fail(f"{message}; {REQUIRE_SHARED_DATA_ENV}=1 makes that a failure. Put the data "
                    f"there or point {SHARED_DATA_ENV} at the folder holding {relative}.",
                    pytrace=False)
    pytest.skip(f"{message}: optional data, set {SHARED_DATA_ENV} to the folder holding "
                f"{relative} to run this test")


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers",
        "threads: exercises the server's concurrent machinery (single-flight, Redis, lifetimes, "
        "deadlines); the TSan pass of scripts/ci_sanitizers.sh runs only these of a suite too "
        "slow to run whole under TSan")


# A hang guard, not a speed limit: the slowest test takes 15 s on the optimised build, and CI's
# hard limit is the whole run's. A test still running after this many seconds (times the
# sanitizer builds' slowdown, capped) gets every thread's stack printed and ends the session
# (pytest-timeout's thread method: it also fires inside a blocking C call, such as a gRPC call
# without a deadline), so a hang costs CI minutes and names itself instead of eating the
# budget. A test may set its own with @pytest.mark.timeout(seconds).
HANG_GUARD_S = 240.0
HANG_GUARD_MAX_S = 600.0


def pytest_collection_modifyitems(config, items) -> None:
    guard = min(HANG_GUARD_S * time_scale(), HANG_GUARD_MAX_S)
    for item in items:
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(guard, method="thread"))


def pytest_report_header(config) -> str:
    path = qqp_pairs_path()
    state = "found" if path.is_file() else (
        "ABSENT: the tests that need it fail" if shared_data_required()
        else "absent: the tests that need it skip")
    return (f"tailcut shared data: {path} ({state}; ${SHARED_DATA_ENV}, "
            f"${REQUIRE_SHARED_DATA_ENV}={'1' if shared_data_required() else 'unset'})")


def require_file(path: Path, what: str, hint: str) -> Path:
    """Fails the test (not skips: set-up always provides these) with a message saying how to get
    it. Optional shared data goes through require_shared_data() instead."""
    if not path.is_file():
        pytest.fail(f"{what} not found at {path}.\n{hint}", pytrace=False)
    return path


# --- Integration tests against the real `tailcut serve` binary ------------------------------------
#
# The test_*_api.py, test_concurrency.py, test_bad_input.py, test_admission.py, test_shutdown.py and
# test_metrics.py suites start the built binary on 127.0.0.1 (port 0: the kernel picks a free one,
# the server logs it) and talk to it with real clients. Every server's stdout/stderr goes to a log
# file; the log's tail is attached to the report of any test that fails while the server runs.

import errno
import gzip
import json
import re
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Iterable, Mapping

import numpy as np
import requests

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSIONS = 384
MAX_TOKENS = 256


def repository_root() -> Path:
    return REPO_ROOT


def tailcut_binary_path() -> Path:
    return build_dir() / "tailcut"


def golden_path() -> Path:
    return REPO_ROOT / "tests" / "data" / "golden_minilm.json"


def require_tailcut_binary() -> Path:
    return require_file(tailcut_binary_path(), "tailcut binary",
                        "Build it: cmake --build build (or make build), or set TAILCUT_BUILD_DIR "
                        "to your build folder.")


def require_default_model() -> Path:
    folder = model_dir()
    for name in ("model.yaml", "model.onnx", "tokenizer.json"):
        require_file(folder / name, f"default model file {name}",
                     "Run scripts/setup.sh (it exports the model), or set TAILCUT_MODEL_DIR to the "
                     "all-MiniLM-L6-v2 folder.")
    return folder


RERANKER_NAME = "minilm-l6-qqp-reranker"


def require_reranker_model() -> Path:
    """The cross-encoder scripts/setup.sh exports (tools/export_cross_encoder.py)."""
    folder = REPO_ROOT / "models" / RERANKER_NAME
    for name in ("model.yaml", "model.onnx", "model.int8-per-token.onnx", "tokenizer.json",
                 "semantic_operating_points.json"):
        require_file(folder / name, f"reranker model file {name}",
                     "Run scripts/setup.sh (it exports the cross-encoder).")
    return folder


class ServerError(AssertionError):
    """The server did not start, did not get ready, or did not stop as expected."""


_SERVERS: list["TailcutServer"] = []  # Every server started this session, for failure reports.
_LISTENING = re.compile(r"listening on http://[^\s:]+:(\d+)")
_GRPC_LISTENING = re.compile(r"KServe v2 gRPC on [^\s]+:(\d+)")



class TailcutServer:
    """One `tailcut serve` process.

    args: extra command-line flags. env: extra environment (inherited TAILCUT_* variables are
    dropped first so a developer's shell cannot change what a test runs). model_repository:
    defaults to the repository holding the default model. grpc: also serve KServe v2 over gRPC
    on a free port (grpc_port); without it the gRPC listener is off, so that servers started
    side by side do not contend for its default port 8001.
    """

    def __init__(self, args: Iterable[str] = (), env: Mapping[str, str] | None = None,
                 model_repository: Path | str | None = None, name: str = "tailcut",
                 log_dir: Path | None = None, ready_timeout: float = 90.0, grpc: bool = False):
        self.args = [str(a) for a in args]
        self.grpc = grpc
        self.grpc_port: int | None = None
        self.env = dict(env or {})
        self.model_repository = Path(model_repository) if model_repository else model_dir().parent
        self.name = name
        self.ready_timeout = ready_timeout
        self.log_path = Path(log_dir or tempfile.mkdtemp(prefix="tailcut-test-")) / f"{name}.log"
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None
        self.started_at = 0.0
        self.stopped_at: float | None = None
        self.returncode: int | None = None

    # -- life cycle --

    @property
    def command(self) -> list[str]:
        # The precision controller is off unless a test turns it on (flags given twice take
        # the last value): tests compare vectors with FP32 references, and a switch to INT8
        # under test load would make those comparisons depend on the machine's speed.
        return [str(require_tailcut_binary()), "serve", "--host", "127.0.0.1", "--port", "0",
                "--grpc-port", str(self.grpc_port or 0),
                "--model-repository", str(self.model_repository), "--precision.mode", "off",
                *self.args]

    def start(self, wait_ready: bool = True) -> "TailcutServer":
        require_tailcut_binary()
        env = {k: v for k, v in os.environ.items() if not k.startswith("TAILCUT_")}
        env.update(self.env)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "wb")
        self.started_at = time.time()
        retry_until = time.monotonic() + 60
        if self.grpc:
            self.grpc_port = free_port()  # gRPC's listener takes no port 0 (0 = off).
        while True:
            try:
                self.proc = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT,
                                             env=env, stdin=subprocess.DEVNULL, cwd=str(REPO_ROOT))
                break
            except OSError as e:
                # EACCES / ETXTBSY: a concurrent `cmake --build` is relinking the binary.
                if e.errno not in (errno.EACCES, errno.ETXTBSY) or time.monotonic() > retry_until:
                    log.close()
                    raise
                time.sleep(0.5)
        log.close()  # The child holds its own descriptor.
        _SERVERS.append(self)
        self.port = self._wait_for_port()
        if self.grpc:
            m = _GRPC_LISTENING.search(self.log_text())
            if not m or int(m.group(1)) != self.grpc_port:
                self._fail(f"did not log its gRPC port {self.grpc_port}")
        if wait_ready:
            self.wait_ready()
        return self

    def _wait_for_port(self, timeout: float = 30.0) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = _LISTENING.search(self.log_text())
            if m:
                return int(m.group(1))
            if self.proc.poll() is not None:
                self._fail(f"exited with code {self.proc.returncode} before listening")
            time.sleep(0.02)
        self._fail(f"did not log its port within {timeout:.0f} s")

    def wait_ready(self, timeout: float | None = None) -> None:
        """Polls /v2/health/ready until 200 (fails on timeout or if the process exits)."""
        deadline = time.monotonic() + (timeout or self.ready_timeout)
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self._fail(f"exited with code {self.proc.returncode} before getting ready")
            try:
                if requests.get(self.url("/v2/health/ready"), timeout=5).status_code == 200:
                    return
            except requests.ConnectionError:
                pass
            time.sleep(0.02)
        self._fail(f"not ready within {timeout or self.ready_timeout:.0f} s")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def send_signal(self, sig: int = signal.SIGTERM) -> None:
        self.proc.send_signal(sig)

    def wait_exit(self, timeout: float = 30.0) -> int:
        try:
            self.returncode = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            self.stopped_at = time.time()
            self._fail(f"did not exit within {timeout:.0f} s (killed)")
        self.stopped_at = time.time()
        return self.returncode

    def stop(self, expect_code: int | None = 0, timeout: float = 30.0,
             sig: int = signal.SIGTERM) -> int:
        """SIGTERM (by default), wait, and check the exit code (None: any code is fine)."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.send_signal(sig)
        code = self.wait_exit(timeout)
        if expect_code is not None and code != expect_code:
            self._fail(f"exited with code {code}, expected {expect_code}")
        return code

    def __enter__(self) -> "TailcutServer":
        return self.start() if self.proc is None else self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self.proc is not None and self.stopped_at is None:
            self.stop()

    def _fail(self, what: str):
        raise ServerError(f"tailcut server '{self.name}' {what}.\ncommand: {' '.join(self.command)}\n"
                          f"--- log {self.log_path} (tail) ---\n{self.log_tail()}")

    # -- logs --

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    # -- HTTP --

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return self.base_url + path

    def get(self, path: str, **kwargs) -> requests.Response:
        kwargs.setdefault("timeout", 60)
        return requests.get(self.url(path), **kwargs)

    def post(self, path: str, body=None, **kwargs) -> requests.Response:
        kwargs.setdefault("timeout", 60)
        return requests.post(self.url(path), json=body, **kwargs)

    def metrics(self) -> str:
        r = self.get("/metrics")
        assert r.status_code == 200, r.text
        return r.text

    def embed(self, texts: list[str] | str, **fields) -> np.ndarray:
        """Embeddings via /v1/embeddings (float), as an [n, dim] float64 array."""
        r = self.post("/v1/embeddings", {"input": texts, **fields})
        assert r.status_code == 200, f"{r.status_code}: {r.text[:500]}"
        data = sorted(r.json()["data"], key=lambda d: d["index"])
        return np.array([d["embedding"] for d in data], dtype=np.float64)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    for s in _SERVERS:
        overlaps = s.started_at <= call.stop and (s.stopped_at is None or s.stopped_at >= call.start)
        if overlaps:
            state = "running" if s.alive() else f"exited {s.proc.returncode if s.proc else '?'}"
            report.sections.append((f"tailcut server '{s.name}' log ({state}, {s.log_path})",
                                    s.log_tail(120)))


def make_model_repository(root: Path, models: Mapping[str, object] | None = None,
                          include_default: bool = True) -> Path:
    """A model repository folder: a symlink to the default model plus one folder per entry of
    `models` (name -> onnx.ModelProto, serialized bytes, or a path to a .onnx file), each
    holding model.onnx, i.e. a tensor model named after its folder."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    if include_default:
        link = root / DEFAULT_MODEL_NAME
        if not link.exists():
            link.symlink_to(require_default_model(), target_is_directory=True)
    for name, model in (models or {}).items():
        folder = root / name
        folder.mkdir(exist_ok=True)
        target = folder / "model.onnx"
        if isinstance(model, (str, Path)):
            target.write_bytes(Path(model).read_bytes())
        elif isinstance(model, bytes):
            target.write_bytes(model)
        else:
            target.write_bytes(model.SerializeToString())
    return root


@dataclass(frozen=True)
class GoldenItem:
    text: str
    embedding: np.ndarray  # float64, unit length


def load_golden() -> list[GoldenItem]:
    path = require_file(golden_path(), "golden embeddings",
                        "Generate them with tools/make_golden.py (scripts/setup.sh does this).")
    data = json.loads(path.read_text(encoding="utf-8"))
    return [GoldenItem(i["text"], np.asarray(i["embedding"], dtype=np.float64))
            for i in data["items"]]


def load_qqp_questions(limit: int = 2000) -> list[str]:
    """Distinct QQP questions in file order; skips (or fails, see require_shared_data) without
    the data. Only for tests about QQP itself: tests that just need texts use sample_texts."""
    path = require_shared_data(QQP_PAIRS, "QQP pairs")
    seen: dict[str, None] = {}
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            for key in ("a", "b"):
                text = row.get(key)
                if text and text.strip():
                    seen.setdefault(text, None)
            if len(seen) >= limit:
                break
    return list(seen)[:limit]


SAMPLE_TEXT_MAX_WORDS = 12  # ~16 tokens on average, like the short queries the timings assume.


def load_sample_texts(limit: int = 2000) -> list[str]:
    """Short realistic English sentences (4..12 words), distinct, in a fixed order: the "test"
    part (disjoint from the quantization calibration texts) of the sentences of the Python
    documentation in Debian's python3.11-doc package (tools/doc_corpus.py), which
    scripts/setup.sh installs."""
    tools = str(REPO_ROOT / "tools")
    if tools not in sys.path:
        sys.path.insert(0, tools)
    try:
        import doc_corpus
        sentences = doc_corpus.split(doc_corpus.sentences(), "test")
    except (ImportError, OSError) as e:
        pytest.fail(f"sample texts unavailable ({type(e).__name__}: {e}).\nThey come from Debian's "
                    "python3.11-doc (/usr/share/doc/python3.11/html) through tools/doc_corpus.py; "
                    "run scripts/setup.sh, which installs the package.", pytrace=False)
    texts = list(dict.fromkeys(t for t in sentences
                               if t.strip() and len(t.split()) <= SAMPLE_TEXT_MAX_WORDS))[:limit]
    if len(texts) < 200:
        pytest.fail(f"tools/doc_corpus.py gave only {len(texts)} distinct sentences (need 200); "
                    "is python3.11-doc fully installed?", pytrace=False)
    return texts


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = np.atleast_2d(np.asarray(a, dtype=np.float64))
    b = np.atleast_2d(np.asarray(b, dtype=np.float64))
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


class EmbeddingLoad:
    """Closed-loop clients that keep posting one text each to /v1/embeddings until stopped (a
    context manager), keeping every answer as (text, vector, X-Tailcut-Variant) and every
    failure (non-200 or transport error). Client c sends texts[(c * 97 + k) % len(texts)]."""

    def __init__(self, server: "TailcutServer", texts: list[str], clients: int = 4):
        self.server, self.texts = server, texts
        self.answers: list[tuple[str, np.ndarray, str]] = []
        self.failures: list[str] = []
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._client, args=(c,), daemon=True)
                         for c in range(clients)]

    def _client(self, c: int) -> None:
        with requests.Session() as session:
            k = 0
            while not self._stop.is_set():
                text = self.texts[(c * 97 + k) % len(self.texts)]
                k += 1
                try:
                    r = session.post(self.server.url("/v1/embeddings"), json={"input": text},
                                     timeout=60)
                except requests.RequestException as e:
                    with self.lock:
                        self.failures.append(repr(e))
                    continue
                with self.lock:
                    if r.status_code != 200:
                        self.failures.append(f"{r.status_code} {r.text[:200]}")
                    else:
                        self.answers.append((text, np.asarray(r.json()["data"][0]["embedding"]),
                                             r.headers["X-Tailcut-Variant"]))

    def served_by(self) -> dict[str, int]:
        """How many answers each X-Tailcut-Variant value got so far."""
        with self.lock:
            counts: dict[str, int] = {}
            for _, _, v in self.answers:
                counts[v] = counts.get(v, 0) + 1
            return counts

    def __enter__(self) -> "EmbeddingLoad":
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=60)


def run_threads(worker, count: int) -> None:
    """Runs worker(i) for i in range(count) on `count` threads, all released at once; re-raises
    the first exception a worker raised."""
    barrier = threading.Barrier(count)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            barrier.wait(timeout=60)
            worker(i)
        except BaseException as e:  # noqa: BLE001 - reported to the test below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    if errors:
        raise errors[0]
    assert not any(t.is_alive() for t in threads), "worker threads did not finish"


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def tailcut_build_dir() -> Path:
    return build_dir()


@pytest.fixture(scope="session")
def tailcut_bin() -> Path:
    return require_tailcut_binary()


@pytest.fixture(scope="session")
def default_model_dir() -> Path:
    return require_default_model()


@pytest.fixture(scope="session")
def golden_items() -> list[GoldenItem]:
    return load_golden()


@pytest.fixture(scope="session")
def sample_texts() -> list[str]:
    """2,000 distinct short natural sentences (Python documentation), always available."""
    return load_sample_texts()


@pytest.fixture(scope="session")
def hf_tokenizer(default_model_dir: Path):
    import tokenizers  # In the project's venv: a missing package is a broken set-up, not a skip.

    tok = tokenizers.Tokenizer.from_file(str(default_model_dir / "tokenizer.json"))
    tok.enable_truncation(MAX_TOKENS)
    tok.no_padding()
    return tok


@pytest.fixture
def start_server(tmp_path: Path, tailcut_bin: Path, default_model_dir: Path):
    """Factory: start_server(*flags, env=..., model_repository=..., wait_ready=True, name=...).
    Servers still running at the end of the test are stopped and must exit 0."""
    started: list[TailcutServer] = []

    def start(*args: str, env: Mapping[str, str] | None = None,
              model_repository: Path | None = None, wait_ready: bool = True,
              name: str | None = None) -> TailcutServer:
        s = TailcutServer(args, env=env, model_repository=model_repository,
                          name=name or f"server{len(started)}", log_dir=tmp_path)
        started.append(s)
        return s.start(wait_ready=wait_ready)

    yield start
    for s in started:
        if s.proc is not None and s.stopped_at is None:
            s.stop()


@pytest.fixture(scope="module")
def model_repository_factory(tmp_path_factory):
    """Factory for make_model_repository() in a fresh temporary folder."""
    def make(models: Mapping[str, object] | None = None, include_default: bool = True) -> Path:
        return make_model_repository(tmp_path_factory.mktemp("models"), models, include_default)
    return make


@pytest.fixture(scope="module")
def server(tailcut_bin: Path, default_model_dir: Path, tmp_path_factory):
    """A default server (default model only, default settings) shared by a test module."""
    repo = make_model_repository(tmp_path_factory.mktemp("models"))
    with TailcutServer(model_repository=repo, name="default",
                       log_dir=tmp_path_factory.mktemp("logs")) as s:
        yield s


# --- Prometheus text exposition (used by test_metrics.py and test_cache.py) -----------------------

import math
from collections import defaultdict
from dataclasses import field

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_SAMPLE = re.compile(rf"^({_NAME})(?:\{{(.*)\}})? (\S+)(?: (-?\d+))?$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)')
STAGES = ("parse", "tokenize", "cache", "queue", "batch", "infer", "serialize", "total")


@dataclass
class Family:
    name: str
    type: str = "untyped"
    help: str = ""
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)


def parse_labels(text: str) -> dict[str, str]:
    labels, pos = {}, 0
    while pos < len(text):
        m = _LABEL.match(text, pos)
        assert m, f"bad label syntax at {text[pos:]!r}"
        assert m.group(1) not in labels, f"duplicate label {m.group(1)}"
        labels[m.group(1)] = m.group(2).replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
        pos = m.end()
    return labels


def parse_prometheus(text: str) -> dict[str, Family]:
    """A strict little parser of the text format (0.0.4): HELP/TYPE before samples, every
    sample in a declared family, valid names, labels and values."""
    families: dict[str, Family] = {}
    assert text.endswith("\n"), "the exposition must end with a newline"
    for n, line in enumerate(text.splitlines(), 1):
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                assert re.fullmatch(_NAME, parts[2]), f"line {n}: bad name {parts[2]!r}"
                fam = families.setdefault(parts[2], Family(parts[2]))
                if parts[1] == "TYPE":
                    assert not fam.samples, f"line {n}: TYPE after samples of {parts[2]}"
                    assert parts[3] in ("counter", "gauge", "histogram", "summary", "untyped")
                    fam.type = parts[3]
                else:
                    fam.help = parts[3] if len(parts) > 3 else ""
            continue
        m = _SAMPLE.match(line)
        assert m, f"line {n}: not a sample: {line!r}"
        name, labels, value = m.group(1), parse_labels(m.group(2) or ""), float(m.group(3))
        base = name
        for suffix in ("_bucket", "_sum", "_count"):
            if name.endswith(suffix) and name[: -len(suffix)] in families and \
                    families[name[: -len(suffix)]].type == "histogram":
                base = name[: -len(suffix)]
        assert base in families, f"line {n}: sample of undeclared family {name}"
        families[base].samples.append((name, labels, value))
    for fam in families.values():
        check_family(fam)
    return families


def check_family(fam: Family) -> None:
    if fam.type == "counter":
        assert all(v >= 0 and not math.isnan(v) for _, _, v in fam.samples), fam.name
    if fam.type != "histogram":
        return
    series: dict[tuple, list[tuple[float, float]]] = defaultdict(list)
    totals: dict[tuple, dict[str, float]] = defaultdict(dict)
    for name, labels, value in fam.samples:
        key = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
        if name.endswith("_bucket"):
            le = labels["le"]
            series[key].append((math.inf if le == "+Inf" else float(le), value))
        else:
            totals[key][name[len(fam.name):]] = value
    for key, buckets in series.items():
        les = [le for le, _ in buckets]
        assert les == sorted(les) and les[-1] == math.inf, f"{fam.name}{key}: bucket order"
        counts = [c for _, c in buckets]
        assert counts == sorted(counts), f"{fam.name}{key}: buckets not cumulative"
        assert totals[key]["_count"] == counts[-1], f"{fam.name}{key}: +Inf != _count"
        assert "_sum" in totals[key]


def values(fams, name: str, **labels) -> list[float]:
    base = re.sub(r"_(bucket|sum|count)$", "", name) if name not in fams else name
    fam = fams[base]
    return [v for n, l, v in fam.samples
            if n == name and all(l.get(k) == want for k, want in labels.items())]


def value(fams, name: str, **labels) -> float:
    return sum(values(fams, name, **labels))


def server_timing(header: str) -> dict[str, float]:
    out = {}
    for part in header.split(","):
        m = re.fullmatch(r"\s*([a-z]+);dur=(\d+(?:\.\d+)?)\s*", part)
        assert m, f"bad Server-Timing entry {part!r} in {header!r}"
        out[m.group(1)] = float(m.group(2))
    return out


def scrape(server: "TailcutServer") -> dict[str, Family]:
    """The server's /metrics, parsed (strictly)."""
    return parse_prometheus(server.metrics())


# --- A private redis-server for the cache tests (Python twin of tests/cache/redis_server_fixture.h)
#
# Each RedisServer runs `redis-server` on a free loopback port with persistence off, in its own
# temp folder, and can be killed (SIGKILL), paused (SIGSTOP), resumed (SIGCONT) and restarted on
# the same port. It is started with PR_SET_PDEATHSIG so the kernel kills it if pytest dies.
# command() speaks RESP over a raw socket (binary-safe; no client package needed).

import ctypes
import shutil
import socket


class RedisError(Exception):
    """An error reply from Redis (the message is the reply text)."""


def redis_server_binary() -> str | None:
    env = os.environ.get("TAILCUT_REDIS_SERVER")
    if env:
        return env if os.access(env, os.X_OK) else None
    return shutil.which("redis-server") or (
        "/usr/bin/redis-server" if os.access("/usr/bin/redis-server", os.X_OK) else None)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:  # preexec_fn: runs in the child between fork and exec.
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _resp_encode(args) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


class _RespReader:
    def __init__(self, sock: socket.socket):
        self.sock, self.buf = sock, b""

    def _fill(self) -> None:
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("redis closed the connection")
        self.buf += chunk

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n: int) -> bytes:
        while len(self.buf) < n + 2:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def read(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return RedisError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise ConnectionError(f"bad RESP reply {line[:80]!r}")


class RedisServer:
    """One throwaway redis-server. args: extra server arguments (e.g. "--requirepass", "pw")."""

    def __init__(self, folder: Path, args: Iterable[str] = (), name: str = "redis"):
        self.binary = redis_server_binary()
        if not self.binary:
            pytest.fail("redis-server not found ($TAILCUT_REDIS_SERVER, PATH, /usr/bin/redis-server)"
                        "; the cache tests need a real Redis: apt-get install redis-server",
                        pytrace=False)
        self.dir = Path(folder)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.args = [str(a) for a in args]
        self.name = name
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self.admin_user: str | None = None
        self.admin_password: str | None = None
        self.log_path = self.dir / f"{name}.log"

    # -- life cycle --

    def start(self) -> "RedisServer":
        for _ in range(5):  # Another process may take the port between the probe and the bind.
            self.port = free_port()
            if self._spawn():
                return self
        raise AssertionError(f"redis-server did not start; log:\n{self.log_tail()}")

    def _spawn(self, timeout: float = 10.0) -> bool:
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.dir), *self.args],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False  # E.g. the port was taken.
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(_resp_encode(["PING"]))
                    _RespReader(s).read()  # PONG, or NOAUTH: either way it serves.
                    return True
            except OSError:
                time.sleep(0.02)
        self.kill()
        return False

    def kill(self) -> None:
        """SIGKILL (works on a paused server too) and reap."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def pause(self) -> None:
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def restart(self) -> "RedisServer":
        """Kills it and starts a fresh, empty one on the same port."""
        self.kill()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self._spawn():
                return self
            time.sleep(0.05)
        raise AssertionError(f"redis-server did not restart on port {self.port}; log:\n"
                             f"{self.log_tail()}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""

    # -- commands --

    def set_admin_auth(self, password: str | None, user: str | None = None) -> None:
        """Credentials command() uses once the test has set requirepass or ACL users."""
        self.admin_user, self.admin_password = user, password

    def command(self, *args, timeout: float = 5.0):
        """Runs one command on a fresh connection; raises RedisError on an error reply."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as s:
            reader = _RespReader(s)
            if self.admin_password is not None:
                auth = ["AUTH"] + ([self.admin_user] if self.admin_user else []) + \
                       [self.admin_password]
                s.sendall(_resp_encode(auth))
                reply = reader.read()
                if isinstance(reply, RedisError):
                    raise reply
            s.sendall(_resp_encode(args))
            reply = reader.read()
        if isinstance(reply, RedisError):
            raise reply
        return reply

    def keys(self, pattern: str = "*") -> list[bytes]:
        """Every key matching `pattern` (SCAN, not KEYS)."""
        cursor, out = b"0", []
        while True:
            cursor, batch = self.command("SCAN", cursor, "MATCH", pattern, "COUNT", 1000)
            out.extend(batch)
            if cursor == b"0":
                return sorted(set(out))


@pytest.fixture
def redis_server(tmp_path: Path):
    """Factory: redis_server(*extra_server_args, name=...) -> a started RedisServer; every one is
    killed at the end of the test. Fails (not skips) if redis-server is not installed."""
    started: list[RedisServer] = []

    def start(*args: str, name: str | None = None) -> RedisServer:
        name = name or f"redis{len(started)}"
        r = RedisServer(tmp_path / name, args, name=name)
        started.append(r)
        return r.start()

    yield start
    for r in started:
        r.kill()


def wait_until(predicate, timeout: float, interval: float = 0.02, what: str = "condition"):
    """Polls predicate() until it returns something truthy (returned); fails after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.1f} s waiting for {what}")
        time.sleep(interval)


# --- .proto files checked against the descriptors a protocol's own package ships -------------------

def compile_proto(proto: Path, out_dir: Path):
    """Our .proto file compiled by protoc, as a FileDescriptorProto."""
    from google.protobuf import descriptor_pb2
    protoc = shutil.which("protoc")
    if protoc is None:
        pytest.fail("protoc not found: scripts/setup.sh installs protobuf-compiler", pytrace=False)
    out = out_dir / (proto.stem + ".pb")
    subprocess.run([protoc, f"-I{proto.parent}", f"--descriptor_set_out={out}", str(proto)], check=True)
    return descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file[0]


def proto_fields(modules_or_files) -> dict[str, set]:
    """Every message (nested ones as Outer.Inner) of the given generated modules or
    FileDescriptorProtos: its fields as (name, number, type, label, type's short name)."""
    from google.protobuf import descriptor_pb2

    def walk(messages, prefix, found):
        for m in messages:
            found[prefix + m.name] = {(f.name, f.number, f.type, f.label, f.type_name.rsplit(".", 1)[-1])
                                      for f in m.field}
            walk(m.nested_type, prefix + m.name + ".", found)

    found: dict[str, set] = {}
    for item in modules_or_files:
        fd = item
        if not isinstance(item, descriptor_pb2.FileDescriptorProto):
            fd = descriptor_pb2.FileDescriptorProto()
            item.DESCRIPTOR.CopyToProto(fd)
        walk(fd.message_type, "", found)
    return found


def assert_proto_subset(ours: dict[str, set], theirs: dict[str, set]) -> None:
    """Each of our messages exists there with the same fields (numbers, types) or a subset."""
    for name, fields in ours.items():
        assert name in theirs, f"message {name} is not the protocol's"
        assert fields <= theirs[name], (name, fields - theirs[name])
