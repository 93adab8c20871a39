"""Generation routes (/v1/completions, /v1/chat/completions, /v2/models/{name}/generate and
generate_stream) driven by the official `openai` client and raw HTTP against the real server.

PARTLY PENDING THE CORE: on this branch InferenceService::Generate answers every request
FailedPrecondition ("text generation is not served yet", HTTP 409), until the generative
servable lands. The tests that need generated text first probe the server and SKIP, saying so,
while it answers that; they never pass without generating. The bad-input tests run now: the
front-ends refuse malformed requests with 400 before the core is asked.

Which model generates: $TAILCUT_TEST_GENERATIVE_MODEL, else the first model GET /v1/models lists
with kind "generative". $TAILCUT_TEST_GENERATIVE_REPOSITORY points the server at a model
repository holding one (default: the test repository with the default embedding model only).
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import openai
import pytest
import requests
from conftest import TailcutServer, make_model_repository, scrape, server_timing, values, wait_until

NOT_SERVED_YET = "text generation is not served yet"


@pytest.fixture(scope="module")
def gen_server(tailcut_bin, default_model_dir, tmp_path_factory):
    repo = os.environ.get("TAILCUT_TEST_GENERATIVE_REPOSITORY")
    repo = Path(repo) if repo else make_model_repository(tmp_path_factory.mktemp("models"))
    with TailcutServer(model_repository=repo, name="generation",
                       log_dir=tmp_path_factory.mktemp("logs")) as s:
        yield s


@pytest.fixture(scope="module")
def client(gen_server) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gen_server.base_url}/v1", api_key="unused", max_retries=0,
                         timeout=60)


@pytest.fixture(scope="module")
def gen_model(gen_server) -> str:
    """The generative model's name; skips (visibly) while the server does not generate."""
    name = os.environ.get("TAILCUT_TEST_GENERATIVE_MODEL")
    if not name:
        models = gen_server.get("/v1/models").json()["data"]
        generative = [m["id"] for m in models if m.get("kind") == "generative"]
        name = generative[0] if generative else "default"
    r = gen_server.post("/v1/completions", {"model": name, "prompt": "Hi", "max_tokens": 1})
    if r.status_code == 409 and NOT_SERVED_YET in r.text:
        pytest.skip(f"PENDING CORE: the server answers 409 '{NOT_SERVED_YET}' for model "
                    f"{name!r} (InferenceService::Generate is not wired to a generative "
                    f"servable on this branch)")
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


def test_routes_exist_and_refuse_until_the_core_generates(gen_server):
    """Documents the state of this branch: without a generative servable the core answers
    FailedPrecondition, which every generation route maps to 409 (a JSON error, no stream)."""
    r = gen_server.post("/v1/completions", {"prompt": "Hi", "stream": True})
    if r.status_code != 409:
        pytest.skip(f"the server generates ({r.status_code}): covered by the tests below")
    assert r.headers["Content-Type"].startswith("application/json")
    assert NOT_SERVED_YET in r.json()["error"]["message"]


# --- Generation: PENDING CORE (skip while the server answers 409 'not served yet') ------------


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


def test_client_leaving_mid_stream_cancels_the_generation(gen_server, gen_model):
    request = json.dumps({"model": gen_model, "prompt": "Write a long story.", "max_tokens": 2000,
                          "stream": True}).encode()
    with socket.create_connection(("127.0.0.1", gen_server.port), timeout=60) as c:
        c.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                  b"Content-Length: " + str(len(request)).encode() + b"\r\n\r\n" + request)
        got = b""
        while b"data: " not in got:
            chunk = c.recv(65536)
            assert chunk, f"closed before the first event: {got!r}"
            got += chunk
    # Gone after the first event: the stream's end is recorded as 499 (client gone) soon after,
    # long before 2000 tokens could be generated.
    def cancelled():
        return sum(values(scrape(gen_server), "tailcut_requests_total",
                          route="/v1/completions", status="499")) >= 1
    wait_until(cancelled, timeout=30, what="the abandoned stream to end as 499")


def test_deadline_header_ends_generation(gen_server, gen_model):
    started = time.monotonic()
    r = gen_server.post("/v1/completions", {"model": gen_model, "prompt": "Tell me everything.",
                                            "max_tokens": 4000},
                        headers={"X-Request-Timeout-Ms": "200"})
    assert r.status_code == 504, r.text
    assert time.monotonic() - started < 30
