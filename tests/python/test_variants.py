"""Tooling check: the precision variants written by tools/quantize_model.py.

For every variant model.yaml lists (besides fp32): the file loads in onnxruntime and answers
with the FP32 model's signature, its embeddings of the golden texts
(tests/data/golden_minilm.json) stay within a measured cosine of the FP32 model's, its
``<file>.manifest.json`` names the FP32 model it was made from (by sha256), and the
quantize-time fidelity / batch-invariance record (manifest and model.yaml: batch_invariant,
fidelity_min_cosine, fidelity_recall_at_10, the server reads them) is there and sane.

Thresholds: a margin below what all-MiniLM-L6-v2 measured on the golden texts (onnxruntime
1.30, 2 AMD EPYC cores with AVX2 and no VNNI, so reduce_range on; batches of 16 in file order
and each text alone, against FP32 run the same way). The worst golden texts for INT8 are the
tiny ones ("OK", "Hi!", "", whitespace only): a two- or three-token input has no averaging to
hide quantization noise.

    variant          measured mean / min      test: mean >= / min >=
    int8-per-token   0.9959 / 0.9891          0.990 / 0.975
    int8-dynamic     0.9877 / 0.9646          0.980 / 0.955
    int8-static      0.9843 / 0.9472          0.975 / 0.925
    fp16             0.999999 / 0.999998      0.99999 / 0.9999

Batch invariance (a text alone vs inside a padded batch of 16): per-token and static INT8 and
FP16 give the same embedding (measured min cosine 1.0000000, max abs difference <= 1e-7;
per-token INT8 takes its activation ranges per token, so by construction); dynamic INT8 does
not, because it picks activation ranges per batch, padding included (measured min 0.959 on
the golden texts).

Quantize-time check set (doc corpus check split, 1,000 sentences + 100 paragraphs), measured:
int8-per-token min cosine 0.9888 / recall@10 0.943, int8-static 0.971 / 0.879, int8-dynamic
0.9735 / 0.879; the floors below leave a margin.

Run:  .venv/bin/python -m pytest tests/python/test_variants.py -q
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO_ROOT, model_dir as default_model_dir

ort = pytest.importorskip("onnxruntime")
tokenizers = pytest.importorskip("tokenizers")

sys.path.insert(0, str(REPO_ROOT / "tools"))
from evaluate_variants import read_variants  # noqa: E402
from variant_data import sha256_file  # noqa: E402

GOLDEN = REPO_ROOT / "tests" / "data" / "golden_minilm.json"
BATCH = 16

# name: (min mean cosine, min cosine) to FP32 on the golden texts; see the module docstring.
COSINE_THRESHOLDS = {
    "int8-per-token": (0.990, 0.975),
    "int8-dynamic": (0.980, 0.955),
    "int8-static": (0.975, 0.925),
    "fp16": (0.99999, 0.9999),
}
# Minimum cosine between a text embedded alone and inside a padded batch.
BATCH_INVARIANCE_MIN = {"int8-per-token": 0.999999, "int8-dynamic": 0.94, "int8-static": 0.9999, "fp16": 0.9999}
EXPECTED = ("int8-per-token", "int8-dynamic", "int8-static", "fp16")
# Quantize-time fidelity floors (min cosine to fp32, recall@10 on the doc check set).
FIDELITY_FLOOR = {"int8-per-token": (0.98, 0.92), "int8-dynamic": (0.95, 0.80), "int8-static": (0.94, 0.80),
                  "fp16": (0.9999, 0.98)}
YAML_FIELDS = ("batch_invariant", "fidelity_min_cosine", "fidelity_recall_at_10")


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


def variant_entry(variants, name: str) -> dict:
    for v in variants[0]:
        if v["name"] == name:
            return v
    pytest.fail(f"model.yaml lists no variant {name!r}; run tools/quantize_model.py", pytrace=False)


def variant_file(variants, name: str) -> str:
    for v in variants[0]:
        if v["name"] == name:
            return v["file"]
    pytest.fail(f"model.yaml lists no variant {name!r}; run tools/quantize_model.py", pytrace=False)


def test_model_yaml_lists_variants(model_dir: Path, variants) -> None:
    listed, default = variants
    names = [v["name"] for v in listed]
    assert listed[0] == {"name": "fp32", "file": "model.onnx", "precision": "fp32", "batch_invariant": True,
                         "fidelity_min_cosine": 1.0, "fidelity_recall_at_10": 1.0}
    assert default == "fp32", "the default variant must stay FP32"
    assert set(EXPECTED) <= set(names), f"model.yaml variants {names}, expected {EXPECTED}"
    assert len(set(names)) == len(names)
    for v in listed:
        assert v["precision"] in ("fp32", "fp16", "int8")
        assert (model_dir / v["file"]).is_file(), f"{v['file']} missing"
        assert set(YAML_FIELDS) <= set(v), f"{v['name']}: model.yaml lacks {set(YAML_FIELDS) - set(v)}"
        assert isinstance(v["batch_invariant"], bool)
        assert 0.0 <= v["fidelity_min_cosine"] <= 1.0 and 0.0 <= v["fidelity_recall_at_10"] <= 1.0
    # Order: fp32, then INT8 with the batch-invariant variants first, each group by fidelity
    # (min cosine to fp32) descending, then fp16. The first INT8 is what "int8" means.
    precisions = [v["precision"] for v in listed]
    assert precisions == sorted(precisions, key=["fp32", "int8", "fp16"].index)
    int8 = [v for v in listed if v["precision"] == "int8"]
    keys = [(not v["batch_invariant"], -v["fidelity_min_cosine"]) for v in int8]
    assert keys == sorted(keys), f"INT8 variants out of order: {list(zip(int8, keys))}"
    assert int8[0]["name"] == "int8-per-token", "the most faithful batch-invariant INT8 is the per-token one"
    assert [v["batch_invariant"] for v in listed if v["name"] == "int8-dynamic"] == [False]


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
        assert calib["sha256"] and calib["texts"] >= 512
        assert calib["corpus"]["package"] == "python3.11-doc" and calib["corpus"]["package_version"]
        assert manifest["method"]["method"] in ("MinMax", "Entropy", "Percentile")
        assert len(manifest["method"]["candidates"]) >= 1
    summary = json.loads((model_dir / "manifest.json").read_text())["variants"][name]
    assert summary["sha256"] == manifest["sha256"]


@pytest.mark.parametrize("name", EXPECTED)
def test_manifest_records_fidelity_and_batch_invariance(model_dir: Path, variants, name: str) -> None:
    entry = variant_entry(variants, name)
    manifest = json.loads((model_dir / f"{entry['file']}.manifest.json").read_text())
    for key in YAML_FIELDS:
        assert manifest[key] == entry[key], f"{name}: model.yaml {key} {entry[key]} != manifest {manifest[key]}"
    fid, inv, check = manifest["fidelity"], manifest["batch_invariance"], manifest["check_data"]
    assert check["texts"] == fid["texts"] >= 1000 and check["sha256"]
    assert check["corpus"]["package"] == "python3.11-doc"
    assert fid["min_cosine"] <= fid["p01_cosine"] <= fid["mean_cosine"] <= 1.0
    assert fid["min_cosine"] == manifest["fidelity_min_cosine"]
    assert fid["recall_at_10"] == manifest["fidelity_recall_at_10"]
    min_cos, min_recall = FIDELITY_FLOOR[name]
    assert fid["min_cosine"] >= min_cos and fid["recall_at_10"] >= min_recall, f"{name}: {fid}"
    assert inv["texts"] >= 200 and inv["max_abs_diff"] >= 0.0
    assert inv["batch_invariant"] == manifest["batch_invariant"] == (inv["min_cosine"] >= 0.999999)
    if name != "int8-dynamic":
        assert manifest["batch_invariant"] is True, f"{name}: {inv}"


def test_per_token_is_batch_invariant_with_mixed_padding(model_dir: Path, variants, tokenizer, golden_texts) -> None:
    """Each text alone vs in batches of very different lengths (heavy padding): the same vector."""
    sess = session(model_dir / variant_file(variants, "int8-per-token"))
    long_text = " ".join(golden_texts[i] for i in range(len(golden_texts)) if golden_texts[i].strip())[:3000]
    texts = ["OK", "How do I learn Python?", long_text, "", "What is the capital of France?"] + golden_texts[:11]
    alone = embed(sess, tokenizer, texts, 1)
    for order in (list(range(len(texts))), list(reversed(range(len(texts))))):
        got = embed(sess, tokenizer, [texts[i] for i in order], len(texts))
        batched = np.empty_like(got)
        batched[order] = got
        cos = (alone * batched).sum(1)
        print(f"\nint8-per-token alone vs batched: min cosine {cos.min():.9f}, "
              f"max abs diff {np.abs(alone - batched).max():.2e}")
        assert cos.min() >= 0.999999 and np.abs(alone - batched).max() <= 1e-5


def test_model_yaml_rewrite_keeps_other_lines(tmp_path: Path) -> None:
    """quantize_model's model.yaml rewrite: replaces only variants/default_variant, idempotently."""
    from quantize_model import rewrite_model_yaml  # noqa: PLC0415

    original = (
        "# comment\nname: m\nfile: model.onnx\nnormalize: true      # keep me\n"
        "variants:\n  - name: old\n    file: old.onnx\n    precision: int8\n\ndefault_variant: old\ndimensions: 384\n"
    )
    new = [{"name": "fp32", "file": "model.onnx", "precision": "fp32", "batch_invariant": True,
            "fidelity_min_cosine": 1.0, "fidelity_recall_at_10": 1.0},
           {"name": "int8-per-token", "file": "model.int8-per-token.onnx", "precision": "int8",
            "batch_invariant": True, "fidelity_min_cosine": 0.988773, "fidelity_recall_at_10": 0.942545},
           {"name": "int8-dynamic", "file": "model.int8-dynamic.onnx", "precision": "int8",
            "batch_invariant": False, "fidelity_min_cosine": 0.9735, "fidelity_recall_at_10": 0.879273}]
    out = rewrite_model_yaml(original, new, "fp32")
    assert out.startswith("# comment\nname: m\nfile: model.onnx\nnormalize: true      # keep me\ndimensions: 384\n")
    assert "old" not in out
    assert "  - name: int8-dynamic\n    file: model.int8-dynamic.onnx\n    precision: int8\n" \
           "    batch_invariant: false\n    fidelity_min_cosine: 0.9735\n    fidelity_recall_at_10: 0.879273\n" in out
    assert rewrite_model_yaml(out, new, "fp32") == out
    path = tmp_path / "model.yaml"
    path.write_text(out)
    listed, default = read_variants(path)
    assert listed == new and default == "fp32"
