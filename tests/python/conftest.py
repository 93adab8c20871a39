"""Shared pytest helpers for tests/python: where the repository, model, build and data live.

Every location can be overridden by an environment variable so CI and developers can point the
tests at other folders:
  TAILCUT_MODEL_DIR  the model folder  (default <repo>/models/all-MiniLM-L6-v2)
  TAILCUT_BUILD_DIR  the CMake build   (default <repo>/build)
Shared data sets live beside the repository, in <repo>/../shared/data.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


def model_dir() -> Path:
    return Path(os.environ.get("TAILCUT_MODEL_DIR") or REPO_ROOT / "models" / "all-MiniLM-L6-v2")


def build_dir() -> Path:
    return Path(os.environ.get("TAILCUT_BUILD_DIR") or REPO_ROOT / "build")


def shared_data_dir() -> Path:
    return REPO_ROOT.parent / "shared" / "data"


def require_file(path: Path, what: str, hint: str) -> Path:
    """Fails the test (not skips: CI always has these) with a message saying how to get it."""
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


class ServerError(AssertionError):
    """The server did not start, did not get ready, or did not stop as expected."""


_SERVERS: list["TailcutServer"] = []  # Every server started this session, for failure reports.
_LISTENING = re.compile(r"listening on http://[^\s:]+:(\d+)")


class TailcutServer:
    """One `tailcut serve` process.

    args: extra command-line flags. env: extra environment (inherited TAILCUT_* variables are
    dropped first so a developer's shell cannot change what a test runs). model_repository:
    defaults to the repository holding the default model.
    """

    def __init__(self, args: Iterable[str] = (), env: Mapping[str, str] | None = None,
                 model_repository: Path | str | None = None, name: str = "tailcut",
                 log_dir: Path | None = None, ready_timeout: float = 90.0):
        self.args = [str(a) for a in args]
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
        return [str(require_tailcut_binary()), "serve", "--host", "127.0.0.1", "--port", "0",
                "--model-repository", str(self.model_repository), *self.args]

    def start(self, wait_ready: bool = True) -> "TailcutServer":
        require_tailcut_binary()
        env = {k: v for k, v in os.environ.items() if not k.startswith("TAILCUT_")}
        env.update(self.env)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "wb")
        self.started_at = time.time()
        retry_until = time.monotonic() + 60
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
    path = require_file(shared_data_dir() / "qqp" / "pairs.jsonl.gz", "QQP pairs",
                        "The shared data set is expected in <repo>/../shared/data/qqp.")
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


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = np.atleast_2d(np.asarray(a, dtype=np.float64))
    b = np.atleast_2d(np.asarray(b, dtype=np.float64))
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


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
def qqp_texts() -> list[str]:
    return load_qqp_questions()


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
