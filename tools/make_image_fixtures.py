#!/usr/bin/env python3
"""Make the Pillow-parity fixtures of the image module's tests (tests/image/data/).

Why this exists
---------------
src/image/ preprocesses images for classifiers whose reference preprocessing is Pillow's
(torchvision's ``Resize`` + ``CenterCrop`` on a PIL image, then ``ToTensor`` and
``Normalize``). The C++ test ``PillowParityTest`` runs the same preprocessing on the same
encoded files and compares its floats with the ones this script computes with Pillow, so a
change in the resampling (filter, antialiasing, rounding, crop offset) shows up as a failure.

What it writes (deterministic for a given Pillow and numpy)::

    pattern.png, pattern.jpg   a 200 x 150 synthetic image: colour gradients, a zone plate
                               (rings whose frequency rises outwards: aliasing shows at once)
                               and a checkerboard with hard 0/255 edges (the bicubic overshoot
                               gets clamped).
    <case>.f32                 Pillow's preprocessed output for each case, float32
                               little-endian, in the case's layout (NCHW or NHWC).
    pillow_reference.json      the cases: source file, options, reference file, and the
                               versions that made them.

Usage (from the repository root, in the tooling environment that scripts/setup.sh makes)::

    .venv/bin/python tools/make_image_fixtures.py            # writes tests/image/data/
    .venv/bin/python tools/make_image_fixtures.py --out-dir /tmp/fixtures

It also prints how far other resampling choices land from the reference (bilinear instead of
bicubic, bicubic without antialiasing), the margin the C++ test's bound has to tell them apart.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import PIL
from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "tests" / "image" / "data"

# EfficientNet-Lite's normalisation (tools/export_image_model.py): 127 and 128 on 0..255.
MEAN = [127.0 / 255.0] * 3
STDDEV = [128.0 / 255.0] * 3

FILTERS = {"bicubic": Image.Resampling.BICUBIC, "bilinear": Image.Resampling.BILINEAR}

# name, source, resize_shorter_side_pixels, crop (width, height), filter, layout.
# 200 x 150 -> 85 x 64 (a 2.35x downscale: the filter's support widens to 4.7 pixels), crop
# 46 x 38 at x = round(19.5) = 20; and -> 341 x 256 (the EfficientNet default, an upscale),
# crop 48 x 48 at x = round(146.5) = 146. Python rounds halves to even: the first offset
# tells it from flooring, the second from rounding halves up.
CASES = [
    ("png_bicubic_down", "pattern.png", 64, (46, 38), "bicubic", "NCHW"),
    ("png_bilinear_down", "pattern.png", 64, (46, 38), "bilinear", "NCHW"),
    ("jpg_bicubic_down", "pattern.jpg", 64, (46, 38), "bicubic", "NCHW"),
    ("png_bicubic_up_nhwc", "pattern.png", 256, (48, 48), "bicubic", "NHWC"),
]


def make_pattern(width: int = 200, height: int = 150) -> np.ndarray:
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    r2 = (x - width / 2) ** 2 + (y - height / 2) ** 2
    zone = 0.5 + 0.5 * np.cos(r2 / 60.0)
    checker = ((x // 10 + y // 10) % 2).astype(np.float64)
    red = 0.6 * x / (width - 1) + 0.4 * zone
    green = np.where(x < width / 2, zone, y / (height - 1))
    blue = np.where(y < height / 2, checker, 1.0 - 0.7 * x / (width - 1))
    rgb = np.stack([red, green, blue], axis=-1)
    return np.clip(np.rint(rgb * 255.0), 0, 255).astype(np.uint8)


def resize_and_crop(img: Image.Image, shorter: int, crop: tuple[int, int], filt) -> Image.Image:
    """torchvision's Resize(shorter) + CenterCrop(crop) on a PIL image, written out."""
    w, h = img.size
    if shorter:
        if w <= h:
            size = (shorter, int(shorter * h / w))
        else:
            size = (int(shorter * w / h), shorter)
        img = img.resize(size, filt)
    w, h = img.size
    cw, ch = crop
    left = int(round((w - cw) / 2.0))
    top = int(round((h - ch) / 2.0))
    return img.crop((left, top, left + cw, top + ch))


def normalise(img: Image.Image, layout: str) -> np.ndarray:
    """ToTensor + Normalize, in float32 as torchvision computes it."""
    a = np.asarray(img, dtype=np.float32) / np.float32(255.0)
    a = (a - np.asarray(MEAN, dtype=np.float32)) / np.asarray(STDDEV, dtype=np.float32)
    if layout == "NCHW":
        a = a.transpose(2, 0, 1)
    return np.ascontiguousarray(a, dtype="<f4")


def unaliased_bicubic(img: Image.Image, shorter: int, crop: tuple[int, int]) -> Image.Image:
    """The same resize as bicubic interpolation without antialiasing: Pillow's affine
    transform samples the filter at the output pixel centres without widening it."""
    w, h = img.size
    size = (shorter, int(shorter * h / w)) if w <= h else (int(shorter * w / h), shorter)
    sx, sy = w / size[0], h / size[1]
    # Output pixel centre (x + 0.5) maps to input (x + 0.5) * sx.
    resized = img.transform(size, Image.Transform.AFFINE, (sx, 0, 0, 0, sy, 0),
                            resample=Image.Resampling.BICUBIC)
    return resize_and_crop(resized, 0, crop, None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    out = args.out_dir
    out.mkdir(parents=True, exist_ok=True)

    source = Image.fromarray(make_pattern(), "RGB")
    source.save(out / "pattern.png", optimize=True)
    # 4:2:0 chroma, quality 90: a typical camera/web JPEG.
    source.save(out / "pattern.jpg", quality=90, subsampling=2)

    manifest = {
        "generator": "tools/make_image_fixtures.py",
        "pillow": PIL.__version__,
        "numpy": np.__version__,
        "cases": [],
    }
    for name, src, shorter, crop, filt, layout in CASES:
        img = Image.open(out / src).convert("RGB")
        ref = normalise(resize_and_crop(img, shorter, crop, FILTERS[filt]), layout)
        ref.tofile(out / f"{name}.f32")
        manifest["cases"].append({
            "name": name,
            "source": src,
            "resize_shorter_side_pixels": shorter,
            "crop_width_pixels": crop[0],
            "crop_height_pixels": crop[1],
            "filter": filt,
            "layout": layout,
            "mean": MEAN,
            "stddev": STDDEV,
            "reference": f"{name}.f32",
        })
    (out / "pillow_reference.json").write_text(json.dumps(manifest, indent=2) + "\n")

    # How far the wrong choices land from the reference, in 8-bit levels (one level is
    # 1/255/stddev = 0.0078 in float units with these stddevs).
    img = Image.open(out / "pattern.png").convert("RGB")
    for shorter, crop in ((64, (46, 38)), (256, (48, 48))):
        ref = np.asarray(resize_and_crop(img, shorter, crop, FILTERS["bicubic"]), dtype=np.int16)
        for label, other in (
            ("bilinear", resize_and_crop(img, shorter, crop, FILTERS["bilinear"])),
            ("bicubic, no antialiasing", unaliased_bicubic(img, shorter, crop)),
        ):
            d = np.abs(np.asarray(other, dtype=np.int16) - ref)
            print(f"shorter side {shorter}: {label} vs Pillow bicubic: max {d.max()} levels, "
                  f"mean {d.mean():.2f}, {100 * (d > 1).mean():.1f}% of values off by more than 1")
    print(f"wrote {len(CASES)} cases to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
