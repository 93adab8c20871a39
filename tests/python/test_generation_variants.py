"""Precision variants of the generative model, through the real server and the official
`openai` client: a Q8_0 made from the shipped Q4_1 by `tailcut quantize-gguf` in a temporary
model repository, declared beside it in model.yaml. Checked: a request pins a variant with the
`precision` field (by name or GGUF type), as embedding requests do, and gets it; every answer
names the variant that produced it (X-Tailcut-Variant and OpenAI's `system_fingerprint`,
streamed chunks too, and the KServe generate routes' header); an unknown variant is a 400
naming the known ones; /v1/models and the KServe metadata list the variants with their
perplexity; Prometheus counts requests per variant and says which one is active.
"""

from __future__ import annotations

import json
import subprocess

import openai
import pytest
import requests
from conftest import TailcutServer, make_model_repository, scrape, value
from test_generation_api import GGUF, generative_model_file

MODEL = "smol-variants"
Q8 = "SmolLM2-135M-Instruct.Q8_0.gguf"


@pytest.fixture(scope="module")
def variant_server(tailcut_bin, default_model_dir, tmp_path_factory):
    repo = make_model_repository(tmp_path_factory.mktemp("models"))
    folder = repo / MODEL
    folder.mkdir()
    (folder / GGUF).symlink_to(generative_model_file())
    made = subprocess.run([str(tailcut_bin), "quantize-gguf", "--in", str(folder / GGUF),
                           "--out", str(folder / Q8), "--type", "q8_0"],
                          capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout.strip().splitlines()[-1])["file_type"]
    # Perplexities as BENCHMARKS.md measured them ("Generative precision variants"). The
    # controller is on but needs more evidence than these tests make (min_window_tokens), so
    # unpinned requests stay on the default whatever the machine's speed (the switching
    # itself is tests/core/generation_precision_test.cc's, on a ManualClock).
    (folder / "model.yaml").write_text(
        f"name: {MODEL}\nkind: generative\ncontext_tokens: 1024\nmax_sequences: 2\n"
        "variants:\n"
        f"  - {{name: q4_1, file: {GGUF}, precision: q4_1, perplexity: 18.346}}\n"
        f"  - {{name: q8_0, file: {Q8}, precision: q8_0, perplexity: 18.354}}\n"
        "default_variant: q4_1\n"
        "precision: {mode: prefill, min_window_tokens: 100000000}\n")
    with TailcutServer(args=("--auth.admin_keys", "root"), model_repository=repo,
                       name="generation-variants",
                       log_dir=tmp_path_factory.mktemp("logs")) as s:
        yield s


@pytest.fixture(scope="module")
def client(variant_server) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{variant_server.base_url}/v1", api_key="unused",
                         max_retries=0, timeout=60)


def test_a_pinned_variant_generates_and_every_answer_names_its_variant(client):
    for pin, want in [(None, "q4_1"), ("q8_0", "q8_0"), ("q4_1", "q4_1")]:
        extra = {"precision": pin} if pin else None
        raw = client.completions.with_raw_response.create(
            model=MODEL, prompt="The capital of France is", max_tokens=4, temperature=0,
            extra_body=extra)
        assert raw.headers["X-Tailcut-Variant"] == want
        completion = raw.parse()
        assert completion.system_fingerprint == want
        assert completion.usage.completion_tokens >= 1
    chat = client.chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content": "Say hi"}], max_tokens=3,
        extra_body={"precision": "q8_0"})
    assert chat.headers["X-Tailcut-Variant"] == "q8_0"
    assert chat.parse().system_fingerprint == "q8_0"


def test_streamed_chunks_name_the_variant(client):
    with client.chat.completions.with_streaming_response.create(
            model=MODEL, messages=[{"role": "user", "content": "Count to three"}],
            max_tokens=5, stream=True, extra_body={"precision": "q8_0"}) as response:
        assert response.headers["X-Tailcut-Variant"] == "q8_0"
        chunks = list(response.parse())
    assert chunks
    assert {c.system_fingerprint for c in chunks} == {"q8_0"}


def test_an_unknown_variant_is_a_400_naming_the_known_ones(client, variant_server):
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=MODEL, prompt="Hi", max_tokens=1,
                                  extra_body={"precision": "q2_k"})
    message = str(e.value)
    assert "q2_k" in message and "q4_1 (q4_1), q8_0 (q8_0)" in message, message
    r = variant_server.post(f"/v2/models/{MODEL}/generate",
                            {"text_input": "Hi", "parameters": {"max_tokens": 1,
                                                                "precision": "int4"}})
    assert r.status_code == 400, r.text
    assert "q8_0" in r.text


def test_kserve_generate_pins_and_names_the_variant(variant_server):
    r = variant_server.post(f"/v2/models/{MODEL}/generate",
                            {"text_input": "Hello", "parameters": {"max_tokens": 2,
                                                                   "precision": "q8_0"}})
    assert r.status_code == 200, r.text
    assert r.headers["X-Tailcut-Variant"] == "q8_0"
    r = requests.post(variant_server.url(f"/v2/models/{MODEL}/generate_stream"),
                      json={"text_input": "Hello", "parameters": {"max_tokens": 2}}, timeout=60)
    assert r.status_code == 200, r.text
    assert r.headers["X-Tailcut-Variant"] == "q4_1"


def test_metadata_lists_the_variants_and_metrics_count_them(client, variant_server):
    models = {m["id"]: m for m in variant_server.get("/v1/models").json()["data"]}
    precision = models[MODEL]["precision"]
    assert precision["active_variant"] == "q4_1"
    assert precision["policy"] == "prefill"
    assert "q4_1 <-> q8_0" in precision["controller"]
    by_name = {v["name"]: v for v in precision["variants"]}
    assert set(by_name) == {"q4_1", "q8_0"}
    assert by_name["q8_0"]["perplexity"] == pytest.approx(18.354)
    assert by_name["q8_0"]["interchangeable"] and by_name["q8_0"]["loaded"]
    assert by_name["q8_0"]["file_digest"] != by_name["q4_1"]["file_digest"]
    meta = variant_server.get(f"/v2/models/{MODEL}").json()
    assert meta["variants"] == ["q4_1", "q8_0"]

    client.completions.create(model=MODEL, prompt="Hi", max_tokens=1,
                              extra_body={"precision": "q8_0"})
    fams = scrape(variant_server)
    assert value(fams, "tailcut_generation_requests_total", model=MODEL, variant="q8_0",
                 chosen="request") >= 1
    assert value(fams, "tailcut_generation_requests_total", model=MODEL, variant="q4_1",
                 chosen="server") >= 1
    assert value(fams, "tailcut_precision_active", model=MODEL, variant="q4_1") == 1
    assert value(fams, "tailcut_precision_active", model=MODEL, variant="q8_0") == 0
    # Each variant has its own KV cache.
    assert value(fams, "tailcut_generation_kv_cells_capacity", model=MODEL) == 2048


def test_an_administrators_pin_moves_unpinned_requests_until_removed(client, variant_server):
    admin = {"Authorization": "Bearer root"}
    url = variant_server.url(f"/admin/models/{MODEL}/precision")
    r = requests.put(url, headers=admin, json={"variant": "q8_0"}, timeout=10)
    assert r.status_code == 200, r.text
    assert r.json() == {"model": MODEL, "active_variant": "q8_0", "policy": "pinned"}
    try:
        done = client.completions.create(model=MODEL, prompt="Hi", max_tokens=1)
        assert done.system_fingerprint == "q8_0"
        # A request's own pin still wins over the administrator's.
        done = client.completions.create(model=MODEL, prompt="Hi", max_tokens=1,
                                         extra_body={"precision": "q4_1"})
        assert done.system_fingerprint == "q4_1"
        r = requests.put(url, headers=admin, json={"variant": "q5_0"}, timeout=10)
        assert r.status_code == 400 and "q4_1 (q4_1), q8_0 (q8_0)" in r.text
    finally:
        r = requests.put(url, headers=admin, json={"variant": None}, timeout=10)
    assert r.status_code == 200 and r.json()["active_variant"] == "q4_1", r.text
    assert r.json()["policy"] == "prefill"
