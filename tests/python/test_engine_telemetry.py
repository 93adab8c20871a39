"""The server keeps to itself: the ONNX Runtime library set-up installs (npm's build) has
telemetry on, which makes every process that creates an environment write a 3 MB SQLite store
under ~/.cache/Microsoft and an empty /tmp/mat-debug-<pid>.log (and send events where its
endpoint is reachable). tailcut turns it off unless the operator set ORT_DISABLE_TELEMETRY."""

from __future__ import annotations

from pathlib import Path

from conftest import TailcutServer, make_model_repository


def test_serving_writes_no_telemetry_files(tmp_path, default_model_dir):
    home = tmp_path / "home"
    home.mkdir()
    repo = make_model_repository(tmp_path / "models")
    with TailcutServer(model_repository=repo, name="telemetry", log_dir=tmp_path,
                       env={"HOME": str(home)}) as s:
        assert s.post("/v1/embeddings", {"input": "no one is watching"}).status_code == 200
        pid = s.proc.pid
        assert not Path(f"/tmp/mat-debug-{pid}.log").exists()
    assert not (home / ".cache" / "Microsoft").exists(), sorted(p.name for p in home.rglob("*"))
