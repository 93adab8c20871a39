"""Tooling check: the exported ONNX model reproduces the original PyTorch model.

The model folder is ``$TAILCUT_MODEL_DIR`` (default ``<repo>/models/all-MiniLM-L6-v2``),
written by tools/export_model.py. The reference is tests/data/golden_minilm.json, made
once with the real sentence-transformers model by tools/make_golden.py.

This runs the graph with onnxruntime's Python API, tokenising with HF ``tokenizers``
(truncation 256, pad to the longest in the batch) and L2-normalising the pooled output,
which is what the server does in C++. The C++ engine has its own golden test.

Run:  .venv/bin/python -m pytest tests/python/test_export.py -q
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
tokenizers = pytest.importorskip("tokenizers")

REPO_ROOT = Path(__file__).resolve().parents[2]
MODEL_DIR = Path(os.environ.get("TAILCUT_MODEL_DIR", REPO_ROOT / "models" / "all-MiniLM-L6-v2"))
GOLDEN = REPO_ROOT / "tests" / "data" / "golden_minilm.json"

GOLDEN_MIN_COSINE = 0.9999
# Same graph, same runtime: padding may only change float summation order.
PADDING_MIN_COSINE = 0.99999
BATCH = 16


def read_model_yaml(path: Path) -> dict[str, str]:
    """Parse the top-level ``key: value  # comment`` lines of model.yaml without a YAML dependency.

    Indented lines (the items of the ``variants:`` list tools/quantize_model.py adds) are not
    top-level keys and are skipped, so a variant's ``file:`` cannot shadow the model's.
    """
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line[:1].isspace() or line.startswith("-"):
            continue
        line = line.split("#", 1)[0].strip()
        if line:
            key, _, value = line.partition(":")
            out[key.strip()] = value.strip()
    return out


@pytest.fixture(scope="module")
def model_dir() -> Path:
    if not (MODEL_DIR / "model.onnx").is_file():
        pytest.fail(
            f"no exported model at {MODEL_DIR} (model.onnx missing). Export it with\n"
            f"    .venv/bin/python tools/export_model.py\n"
            f"(scripts/setup.sh does this), or point TAILCUT_MODEL_DIR at an exported model folder.",
            pytrace=False,
        )
    return MODEL_DIR


@pytest.fixture(scope="module")
def config(model_dir: Path) -> dict[str, str]:
    path = model_dir / "model.yaml"
    if not path.is_file():
        pytest.fail(f"{path} missing; re-run tools/export_model.py --force", pytrace=False)
    return read_model_yaml(path)


@pytest.fixture(scope="module")
def golden() -> dict:
    return json.loads(GOLDEN.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def session(model_dir: Path):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(str(model_dir / "model.onnx"), so, providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module")
def tokenizer(model_dir: Path, golden: dict):
    tok = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.enable_truncation(golden["max_seq_length"])
    tok.enable_padding(pad_id=0, pad_token="[PAD]")  # right side, to the longest in the batch
    return tok


def embed(session, tokenizer, texts: list[str], normalize: bool = True) -> np.ndarray:
    enc = tokenizer.encode_batch(texts)
    feed = {
        "input_ids": np.array([e.ids for e in enc], dtype=np.int64),
        "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
        "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64),
    }
    (out,) = session.run(["sentence_embedding"], feed)
    out = out.astype(np.float64)
    if normalize:
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
    return out


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_model_yaml(config: dict[str, str], golden: dict) -> None:
    assert config["name"] == "all-MiniLM-L6-v2"
    assert config["kind"] == "text-embedding"
    assert config["file"] == "model.onnx"
    assert config["tokenizer"] == "tokenizer.json"
    assert config["output"] == "sentence_embedding"
    assert config["pooling"] == "none"
    assert config["normalize"] == "true"
    assert int(config["dimensions"]) == 384
    assert int(config["max_sequence_length"]) == golden["max_seq_length"] == 256


def test_signature(session) -> None:
    inputs = {i.name: i for i in session.get_inputs()}
    assert set(inputs) == {"input_ids", "attention_mask", "token_type_ids"}
    for info in inputs.values():
        assert info.type == "tensor(int64)"
        assert info.shape == ["batch", "sequence"]
    (output,) = session.get_outputs()
    assert output.name == "sentence_embedding"
    assert output.type == "tensor(float)"
    assert output.shape == ["batch", 384]


def test_tokenization_matches_golden(tokenizer, golden: dict) -> None:
    """Token counts (after truncation) must match what sentence-transformers fed the model."""
    texts = [item["text"] for item in golden["items"]]
    got = [sum(e.attention_mask) for e in tokenizer.encode_batch(texts)]
    bad = [(t[:40], n, item["n_tokens"]) for t, n, item in zip(texts, got, golden["items"]) if n != item["n_tokens"]]
    assert not bad, f"token counts differ (text, got, golden): {bad}"


def test_golden_embeddings(session, tokenizer, golden: dict) -> None:
    """Every golden text, run in padded mixed-length batches, matches PyTorch to cos >= 0.9999."""
    items = golden["items"]
    texts = [item["text"] for item in items]
    want = np.array([item["embedding"] for item in items], dtype=np.float64)
    got = np.concatenate([embed(session, tokenizer, texts[i : i + BATCH]) for i in range(0, len(texts), BATCH)])
    assert got.shape == want.shape
    cos = cosine(got, want)
    worst = np.argsort(cos)[:5]
    report = ", ".join(f"{texts[i][:30]!r}: 1-cos {1 - cos[i]:.1e}" for i in worst)
    print(f"\ngolden: {len(texts)} texts, min cosine {cos.min():.9f} (1-cos {1 - cos.min():.1e}); worst: {report}")
    failing = [(texts[i][:50], float(cos[i])) for i in np.flatnonzero(cos < GOLDEN_MIN_COSINE)]
    assert not failing, f"{len(failing)} golden texts below cosine {GOLDEN_MIN_COSINE}: {failing}"
    # L2-normalised output of the server should itself be unit length and close elementwise.
    assert np.abs(got - want).max() < 5e-3


def test_padding_invariance(session, tokenizer, golden: dict) -> None:
    """A text's embedding must not depend on how much padding its batch adds."""
    texts = [item["text"] for item in golden["items"]]
    alone = np.concatenate([embed(session, tokenizer, [t], normalize=False) for t in texts])
    # Batches in two different groupings, so each text sees different padding lengths.
    for step, order in ((BATCH, np.arange(len(texts))), (7, np.random.default_rng(0).permutation(len(texts)))):
        shuffled = [texts[i] for i in order]
        batched = np.concatenate(
            [embed(session, tokenizer, shuffled[i : i + step], normalize=False) for i in range(0, len(texts), step)]
        )
        cos = cosine(alone[order], batched)
        assert cos.min() >= PADDING_MIN_COSINE, f"padding changed embeddings: min cosine {cos.min():.8f}"
        # The unnormalised pooled vectors too (the server can skip normalisation).
        assert np.abs(alone[order] - batched).max() < 1e-4


def test_manifest(model_dir: Path) -> None:
    """The manifest records provenance, and a fused export really contains the fused ops."""
    manifest = json.loads((model_dir / "manifest.json").read_text())
    assert manifest["onnx"]["opset"] == 17
    assert manifest["source"]["model_safetensors_sha256"]
    if manifest["optimization"]["optimized"]:
        counts = manifest["optimization"]["fused_operator_counts"]
        assert counts["Attention"] == 6 and counts["SkipLayerNormalization"] == 12
        assert counts["EmbedLayerNormalization"] == 1 and counts["BiasGelu"] == 6
