"""A server under benchmark as a child process: started in its own session on a free loopback
port, ready when a health route answers 200, stopped with SIGTERM (SIGKILL after 30 s), with
its CPU seconds and peak RSS readable while it runs. Shared by the benchmark scripts.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path


class BenchError(RuntimeError):
    """A benchmark cannot go on (a server did not start, a tool is missing)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """`argv` runs the server on `port`; its output goes to `log`."""

    def __init__(self, name: str, argv: list[str], port: int, log: Path,
                 ready_path: str = "/v2/health/ready", ready_timeout_s: float = 120):
        self.name, self.argv, self.port, self.log = name, argv, port, log
        self.ready_path, self.ready_timeout_s = ready_path, ready_timeout_s
        self.proc: subprocess.Popen | None = None

    def __enter__(self):
        self.log_file = open(self.log, "w")  # noqa: SIM115
        self.proc = subprocess.Popen(self.argv, stdout=self.log_file, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        t0 = time.monotonic()
        while True:
            if self.proc.poll() is not None or time.monotonic() - t0 > self.ready_timeout_s:
                self.__exit__()
                raise BenchError(f"{self.name}: not ready ({' '.join(self.argv)}):\n"
                                 + self.log.read_text(errors="replace")[-3000:])
            try:
                url = f"http://127.0.0.1:{self.port}{self.ready_path}"
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        return self
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(0.2)

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def peak_rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.log_file.close()
