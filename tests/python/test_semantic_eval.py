"""tools/semantic_cache_eval.py end to end on a slice of the real QQP pairs: it runs `tailcut
semantic-pairs` (features from the server's own C++ code), trains the verifier, prints and
writes every policy's numbers, and writes a weights document that the C++ SemanticVerifier
loads and evaluates to the same probabilities as the trainer.

Needs the shared QQP data: absent, the test skips saying where it looked, except where
TAILCUT_REQUIRE_SHARED_DATA=1 (CI's main run), where its absence fails. The bad-input test needs no
data and no model.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import QQP_PAIRS, REPO_ROOT, build_dir, model_dir, require_file, require_shared_data

TOOL = REPO_ROOT / "tools" / "semantic_cache_eval.py"
LIMIT = 1000  # pairs: about 2,000 texts to embed, ~10 s on two cores


def qqp_pairs() -> Path:
    # Absent: skipped with the reason, or a failure where TAILCUT_REQUIRE_SHARED_DATA=1 (CI's
    # main run; its fresh clone, which has no data beside it, skips like a user's checkout).
    return require_shared_data(QQP_PAIRS, "QQP pairs (labelled pairs for the semantic cache "
                                          "evaluation)")


def tailcut() -> Path:
    return require_file(build_dir() / "tailcut", "the tailcut binary",
                        "Build it: ninja -C build tailcut")


def test_eval_on_real_pairs_writes_weights_the_server_loads(tmp_path: Path) -> None:
    pairs = qqp_pairs()
    binary = tailcut()
    weights = tmp_path / "weights.json"
    report = tmp_path / "report.json"
    svg = tmp_path / "curves.svg"
    run = subprocess.run(
        [sys.executable, str(TOOL), "--pairs", str(pairs), "--limit", str(LIMIT),
         "--tailcut", str(binary), "--model-dir", str(model_dir()),
         "--cache-dir", str(tmp_path / "cache"), "--json-out", str(report),
         "--svg-out", str(svg), "--write-weights", str(weights),
         # The vector space the shipped weights are trained in; the document records it.
         "--variant", "int8-per-token",
         # A slice this small has few pairs per split; the widest δ has an operating point.
         "--default-delta", "0.25"],
        capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "| policy (test split) |" in run.stdout

    r = json.loads(report.read_text())
    assert sum(s["pairs"] for s in r["splits"].values()) == LIMIT
    assert all(s["pairs"] > 0 and s["duplicates"] > 0 for s in r["splits"].values())
    names = [p["policy"] for p in r["policies"]]
    for prefix in ("exact match", "cosine >= 0.80", "cosine >= 0.99", "GPTCache-like",
                   "clustering keys (average", "clustering keys (complete", "verifier, delta"):
        assert any(n.startswith(prefix) for n in names), (prefix, names)
    for p in r["policies"]:
        assert 0.0 <= p["hit_rate"] <= 1.0 and 0.0 <= p["wrong_hit_share"] <= 1.0, p
    # One cosine threshold: a lower threshold never hits fewer duplicates.
    sweep = [p["hit_rate"] for p in r["policies"] if p["policy"].startswith("cosine >= ")]
    assert sweep == sorted(sweep, reverse=True) and sweep[0] > sweep[-1]
    points = r["verifier"]["operating_points"]
    assert points, "the verifier has no operating point"
    assert len(r["curve_check"]["at_cosine_sweep_points"]) == 20
    # The test split divided by whether its questions were seen in fitting: two disjoint
    # parts that make up the whole.
    parts = r["unseen_questions"]
    assert parts["unseen"]["pairs"] + parts["seen"]["pairs"] == r["splits"]["test"]["pairs"]
    assert parts["unseen"]["duplicates"] + parts["seen"]["duplicates"] == \
        r["splits"]["test"]["duplicates"]
    assert "test pairs whose questions were unseen in train/calibration pairs" in run.stdout
    assert svg.read_text().startswith("<svg") and "<polyline" in svg.read_text()

    # The weights document: the C++ side loads it, and its probabilities are the trainer's
    # formula applied to the features the C++ side computed.
    doc = json.loads(weights.read_text())
    assert doc["default_max_wrong_hit_share"] == 0.25
    assert doc["embedding_variant"] == "int8-per-token"
    sample = "\n".join(json.dumps(p) for p in [
        {"a": "How do I learn Python?", "b": "How can I learn Python?", "duplicate": 1},
        {"a": "Why is Messi better than Ronaldo?", "b": "Why is Ronaldo better than Messi?",
         "duplicate": 0},
        {"a": "What is the best laptop under 500 dollars?", "b": "Best laptop under $800?"},
    ]) + "\n"
    scored = subprocess.run([str(binary), "semantic-pairs", "-m", str(model_dir()),
                             "--variant", "int8-per-token", "--verifier", str(weights)],
                            input=sample, capture_output=True, text=True, timeout=60)
    assert scored.returncode == 0, scored.stderr
    lines = [json.loads(line) for line in scored.stdout.splitlines()]
    assert [line["line"] for line in lines] == [1, 2, 3]
    assert "duplicate" not in lines[2]  # The label is optional and passed through.
    for line in lines:
        z = doc["bias"] + sum(f["weight"] * (line["features"][f["name"]] - f["mean"]) / f["scale"]
                              for f in doc["features"])
        assert line["probability"] == pytest.approx(1 / (1 + math.exp(-z)), abs=1e-6)
    # A broken document is refused with the field named.
    doc["features"][0]["weight"] = "heavy"
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(doc))
    refused = subprocess.run([str(binary), "semantic-pairs", "--verifier", str(broken)],
                             input=sample, capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0
    assert 'features[0] "weight" must be a number, not string' in refused.stderr, refused.stderr


def test_semantic_pairs_refuses_a_variant_the_model_lacks() -> None:
    run = subprocess.run([str(tailcut()), "semantic-pairs", "-m", str(model_dir()),
                          "--variant", "int4"], input='{"a": "x", "b": "y"}\n',
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 1
    assert "--variant 'int4'" in run.stderr and "int8-per-token" in run.stderr, run.stderr
    assert run.stdout == ""


@pytest.mark.parametrize("bad, message", [
    ('{"a": "x", "b": "y"}\nnot json\n', "stdin line 2: not valid JSON"),
    ('{"a": "x", "b": "y"}\n\n{"a": "x"}\n', 'stdin line 3: missing field "b"'),
    ('{"a": "x", "b": 7}\n', 'stdin line 1: "b" must be a string'),
    ('{"a": "x", "b": "y", "duplicate": 2}\n', 'stdin line 1: "duplicate" must be 0, 1'),
])
def test_semantic_pairs_names_the_bad_line(bad: str, message: str) -> None:
    run = subprocess.run([str(tailcut()), "semantic-pairs"], input=bad, capture_output=True,
                         text=True, timeout=30)
    assert run.returncode == 1
    assert message in run.stderr, run.stderr
    assert run.stdout == ""
