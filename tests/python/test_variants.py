"""Tooling check: the precision variants written by tools/quantize_model.py.

For every variant model.yaml lists (besides fp32): the file loads in onnxruntime and answers
with the FP32 model's signature, its embeddings of the golden texts
(tests/data/golden_minilm.json) stay within a measured cosine of the FP32 model's, and its
``<file>.manifest.json`` names the FP32 model it was made from (by sha256).

Thresholds: a margin below what all-MiniLM-L6-v2 measured on the golden texts (onnxruntime
1.30, AMD EPYC Zen4 with AVX512-VNNI, reduce_range off; batches of 16 in file order and each
text alone, against FP32 run the same way). The worst golden texts for INT8 are the tiny
ones ("OK", "Hi!", "", whitespace only): a two- or three-token input has no averaging to hide
quantization noise.

    variant        measured mean / min      test: mean >= / min >=
    int8-dynamic   0.9891 / 0.9737          0.980 / 0.955
    int8-static    0.9853 / 0.9493          0.975 / 0.925
    fp16           0.999999 / 0.999998      0.99999 / 0.9999

Batch invariance (a text alone vs inside a padded batch of 16): static INT8 and FP16 give the
same embedding (measured >= 0.999999); dynamic INT8 does not, because it picks activation
ranges per batch, padding included (measured min 0.962 on the golden texts).

Run:  .venv/bin/python -m pytest tests/python/test_variants.py -q
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO_ROOT, model_dir as default_model_dir, shared_data_dir

ort = pytest.importorskip("onnxruntime")
tokenizers = pytest.importorskip("tokenizers")

sys.path.insert(0, str(REPO_ROOT / "tools"))
from evaluate_variants import read_variants  # noqa: E402
from variant_data import sha256_file  # noqa: E402

GOLDEN = REPO_ROOT / "tests" / "data" / "golden_minilm.json"
BATCH = 16

# name: (min mean cosine, min cosine) to FP32 on the golden texts; see the module docstring.
COSINE_THRESHOLDS = {
    "int8-dynamic": (0.980, 0.955),
    "int8-static": (0.975, 0.925),
    "fp16": (0.99999, 0.9999),
}
# Minimum cosine between a text embedded alone and inside a padded batch.
BATCH_INVARIANCE_MIN = {"int8-dynamic": 0.94, "int8-static": 0.9999, "fp16": 0.9999}
EXPECTED = ("int8-dynamic", "int8-static", "fp16")


@pytest.fixture(scope="module")
def model_dir() -> Path:
    folder = default_model_dir()
    if not (folder / "model.yaml").is_file() or not (folder / "model.onnx").is_file():
        pytest.fail(f"no exported model at {folder}; run scripts/setup.sh (export + quantize)", pytrace=False)
    return folder


@pytest.fixture(scope="module")
def variants(model_dir: Path) -> tuple[list[dict[str, str]], str]:
    return read_variants(model_dir / "model.yaml")


@pytest.fixture(scope="module")
def tokenizer(model_dir: Path):
    tok = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.enable_truncation(256)
    tok.enable_padding(pad_id=0, pad_token="[PAD]")
    return tok


@pytest.fixture(scope="module")
def golden_texts() -> list[str]:
    return [item["text"] for item in json.loads(GOLDEN.read_text(encoding="utf-8"))["items"]]


def session(path: Path):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def embed(sess, tok, texts: list[str], batch: int) -> np.ndarray:
    out = []
    for i in range(0, len(texts), batch):
        enc = tok.encode_batch(texts[i : i + batch])
        feed = {
            "input_ids": np.array([e.ids for e in enc], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64),
        }
        (emb,) = sess.run(["sentence_embedding"], feed)
        out.append(emb.astype(np.float64))
    e = np.concatenate(out)
    return e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)


@pytest.fixture(scope="module")
def fp32_golden(model_dir: Path, tokenizer, golden_texts) -> dict[int, np.ndarray]:
    sess = session(model_dir / "model.onnx")
    return {BATCH: embed(sess, tokenizer, golden_texts, BATCH), 1: embed(sess, tokenizer, golden_texts, 1)}


def qqp_available() -> bool:
    return (shared_data_dir() / "qqp" / "pairs.jsonl.gz").exists()


def variant_file(variants, name: str) -> str:
    for v in variants[0]:
        if v["name"] == name:
            return v["file"]
    if name == "int8-static" and not qqp_available():
        pytest.skip("no QQP calibration data (<repo>/../shared/data/qqp): quantize_model skips int8-static")
    pytest.fail(f"model.yaml lists no variant {name!r}; run tools/quantize_model.py", pytrace=False)


def test_model_yaml_lists_variants(model_dir: Path, variants) -> None:
    listed, default = variants
    names = [v["name"] for v in listed]
    assert listed[0] == {"name": "fp32", "file": "model.onnx", "precision": "fp32"}
    assert default == "fp32", "the default variant must stay FP32"
    expected = [n for n in EXPECTED if n != "int8-static" or qqp_available()]
    assert set(expected) <= set(names), f"model.yaml variants {names}, expected {expected}"
    assert len(set(names)) == len(names)
    for v in listed:
        assert v["precision"] in ("fp32", "fp16", "int8")
        assert (model_dir / v["file"]).is_file(), f"{v['file']} missing"
    # Order: fp32, then INT8 with the batch-invariant (static) variants first, each group by
    # the build's validation cosine, then fp16. The first INT8 is what "int8" means.
    precisions = [v["precision"] for v in listed]
    assert precisions == sorted(precisions, key=["fp32", "int8", "fp16"].index)
    int8 = [v for v in listed if v["precision"] == "int8"]
    keys = [(v["name"].startswith("int8-dynamic"),
             -json.loads((model_dir / f"{v['file']}.manifest.json").read_text())["validation"]["mean_cosine"])
            for v in int8]
    assert keys == sorted(keys), f"INT8 variants out of order: {list(zip(int8, keys))}"


@pytest.mark.parametrize("name", EXPECTED)
def test_variant_loads_and_answers(model_dir: Path, variants, tokenizer, name: str) -> None:
    sess = session(model_dir / variant_file(variants, name))
    inputs = {i.name: i for i in sess.get_inputs()}
    assert set(inputs) == {"input_ids", "attention_mask", "token_type_ids"}
    for info in inputs.values():
        assert info.type == "tensor(int64)"
    (output,) = sess.get_outputs()
    assert output.name == "sentence_embedding"
    assert output.type == "tensor(float)", "inputs/outputs stay float32 in every variant"
    emb = embed(sess, tokenizer, ["How do I learn Python?", "What is the capital of France?", ""], 3)
    assert emb.shape == (3, 384)
    assert np.isfinite(emb).all()


@pytest.mark.parametrize("name", EXPECTED)
def test_golden_cosine_to_fp32(model_dir: Path, variants, tokenizer, golden_texts, fp32_golden, name: str) -> None:
    min_mean, min_each = COSINE_THRESHOLDS[name]
    sess = session(model_dir / variant_file(variants, name))
    for batch in (BATCH, 1):
        got = embed(sess, tokenizer, golden_texts, batch)
        cos = (got * fp32_golden[batch]).sum(1)
        worst = np.argsort(cos)[:3]
        report = ", ".join(f"{golden_texts[i][:24]!r}: {cos[i]:.5f}" for i in worst)
        print(f"\n{name} batch {batch}: mean {cos.mean():.6f}, min {cos.min():.6f}; worst {report}")
        assert cos.mean() >= min_mean, f"{name} (batch {batch}): mean cosine {cos.mean():.5f} < {min_mean}"
        assert cos.min() >= min_each, f"{name} (batch {batch}): min cosine {cos.min():.5f} < {min_each}; {report}"


@pytest.mark.parametrize("name", EXPECTED)
def test_batch_invariance(model_dir: Path, variants, tokenizer, golden_texts, name: str) -> None:
    sess = session(model_dir / variant_file(variants, name))
    cos = (embed(sess, tokenizer, golden_texts, BATCH) * embed(sess, tokenizer, golden_texts, 1)).sum(1)
    print(f"\n{name}: alone vs batch of {BATCH}: min cosine {cos.min():.6f}")
    assert cos.min() >= BATCH_INVARIANCE_MIN[name]


@pytest.mark.parametrize("name", EXPECTED)
def test_manifest_names_source(model_dir: Path, variants, name: str) -> None:
    file = variant_file(variants, name)
    manifest_path = model_dir / f"{file}.manifest.json"
    assert manifest_path.is_file(), f"{manifest_path.name} missing"
    manifest = json.loads(manifest_path.read_text())
    assert manifest["variant"] == name and manifest["file"] == file
    assert manifest["source_model"]["sha256"] == sha256_file(model_dir / "model.onnx"), \
        "variant was made from another model.onnx: re-run tools/quantize_model.py"
    assert manifest["key"]["source_model_sha256"] == manifest["source_model"]["sha256"]
    assert manifest["sha256"] == sha256_file(model_dir / file)
    assert manifest["accepted"] is True
    assert manifest["tools"]["onnxruntime"] == ort.__version__
    if name == "int8-static":
        calib = manifest["calibration_data"]
        assert calib["calibration"]["sha256"] and calib["calibration"]["texts"] >= 512
        assert manifest["method"]["method"] in ("MinMax", "Entropy", "Percentile")
        assert len(manifest["method"]["candidates"]) >= 2, "at least two calibration methods are compared"
    summary = json.loads((model_dir / "manifest.json").read_text())["variants"][name]
    assert summary["sha256"] == manifest["sha256"]


def test_model_yaml_rewrite_keeps_other_lines(tmp_path: Path) -> None:
    """quantize_model's model.yaml rewrite: replaces only variants/default_variant, idempotently."""
    from quantize_model import rewrite_model_yaml  # noqa: PLC0415

    original = (
        "# comment\nname: m\nfile: model.onnx\nnormalize: true      # keep me\n"
        "variants:\n  - name: old\n    file: old.onnx\n    precision: int8\n\ndefault_variant: old\ndimensions: 384\n"
    )
    new = [{"name": "fp32", "file": "model.onnx", "precision": "fp32"},
           {"name": "int8-dynamic", "file": "model.int8-dynamic.onnx", "precision": "int8"}]
    out = rewrite_model_yaml(original, new, "fp32")
    assert out.startswith("# comment\nname: m\nfile: model.onnx\nnormalize: true      # keep me\ndimensions: 384\n")
    assert "old" not in out
    assert rewrite_model_yaml(out, new, "fp32") == out
    path = tmp_path / "model.yaml"
    path.write_text(out)
    listed, default = read_variants(path)
    assert listed == new and default == "fp32"
