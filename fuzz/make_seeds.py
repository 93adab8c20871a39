#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora (fuzz/corpus/<target>/) and dictionaries (fuzz/dict/).

Seeds are small, realistic inputs: a valid request of every route and API schema, and the edge
cases the code has branches for (wrong types, limits, chunked bodies, invalid UTF-8, ...). The
fuzzers mutate from there. The files are committed; run this again after changing it:

    python3 fuzz/make_seeds.py            # rewrites fuzz/corpus/* and fuzz/dict/*

Standard library only. Output is deterministic, so a rerun without changes changes nothing.
"""

from __future__ import annotations

import json
import re
import shutil
import struct
from pathlib import Path

FUZZ = Path(__file__).resolve().parent
ROOT = FUZZ.parent


def dumps(obj) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode("utf-8")


# --- JSON bodies, per API ----------------------------------------------------------------------

OPENAI = {
    "single": {"input": "hello world", "model": "default"},
    "batch": {"input": ["hello", "world", "tail latency"], "model": "all-MiniLM-L6-v2"},
    "base64": {"input": "hello", "encoding_format": "base64"},
    "float_format": {"input": ["a"], "encoding_format": "float", "user": "u1"},
    "dimensions_match": {"input": "x", "dimensions": 16},
    "dimensions_mismatch": {"input": "x", "dimensions": 384},
    "dimensions_zero": {"input": "x", "dimensions": 0},
    "precision": {"input": "x", "precision": "int8"},
    "precision_unknown": {"input": "x", "precision": "fp8"},
    "unknown_model": {"input": "x", "model": "gpt-4"},
    "tensor_model": {"input": "x", "model": "echo"},
    "failed_model": {"input": "x", "model": "broken"},
    "token_array": {"input": [[101, 7592, 102]]},
    "int_array": {"input": [1, 2, 3]},
    "empty_array": {"input": []},
    "empty_string": {"input": ""},
    "null_input": {"input": None},
    "missing_input": {"model": "default"},
    "wrong_format": {"input": "x", "encoding_format": "int8"},
    "wrong_types": {"input": "x", "model": 3, "user": [], "dimensions": "16"},
    "unicode": {"input": ["héllo wörld", "日本語のテキスト", "emoji 🎉 test", "\u0000nul"]},
    "escapes": {"input": "line\nbreak\ttab \"quoted\" \\ \u2028"},
}
OPENAI_RAW = {
    "not_json": b"hello",
    "array_body": b'["input"]',
    "truncated": b'{"input": ["a", "b"',
    "lone_surrogate": b'{"input": "\\ud800"}',
    "invalid_utf8": b'{"input": "\xff\xfe"}',
    "duplicate_keys": b'{"input": "a", "input": 1}',
    "deep_nesting": b'{"input": ' + b"[" * 200 + b"]" * 200 + b"}",
    "big_number": b'{"input": "x", "dimensions": 99999999999999999999999}',
    "negative_dims": b'{"input": "x", "dimensions": -1}',
    "float_dims": b'{"input": "x", "dimensions": 16.0}',
    "empty": b"",
}

TEI = {
    "single": {"inputs": "hello world"},
    "batch": {"inputs": ["hello", "world"], "normalize": True, "truncate": True},
    "no_normalize": {"inputs": "x", "normalize": False},
    "truncate_false_long": {"inputs": "word " * 200, "truncate": False},
    "direction_right": {"inputs": "x", "truncation_direction": "Right"},
    "direction_left": {"inputs": "x", "truncation_direction": "Left"},
    "model": {"inputs": "x", "model": "default", "precision": "fp32"},
    "unknown_model": {"inputs": "x", "model": "nope"},
    "wrong_types": {"inputs": "x", "normalize": "yes", "truncate": 1},
    "token_ids": {"inputs": [[101, 102]]},
    "empty": {"inputs": []},
    # /rerank's schema (the target posts every body to /embed and /rerank).
    "rerank": {"query": "what is tail latency?", "texts": ["the slowest requests", "a cache"]},
    "rerank_options": {"query": "q", "texts": ["a"], "raw_scores": True, "return_text": True,
                       "truncate": True, "truncation_direction": "Right"},
    "rerank_wrong_types": {"query": ["q"], "texts": "a", "raw_scores": 1},
    "rerank_empty_texts": {"query": "q", "texts": []},
    "object_input": {"inputs": {"text": "x"}},
    "prompt_name": {"inputs": "x", "prompt_name": None},
}
TEI_RAW = {
    "not_object": b"42",
    "invalid_utf8": b'{"inputs": ["ok", "\xc3\x28"]}',
    "nul_escape": b'{"inputs": "a\\u0000b"}',
}

KSERVE = {
    "text_bytes": {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [2],
                               "data": ["hello", "world"]}]},
    "text_bytes_2d": {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1, 1],
                                  "data": ["hello"]}],
                      "parameters": {"normalize": False, "truncate": True, "precision": "fp32"},
                      "id": "req-1"},
    "text_shape_mismatch": {"inputs": [{"name": "t", "datatype": "BYTES", "shape": [3],
                                        "data": ["a"]}]},
    "text_wrong_datatype": {"inputs": [{"name": "t", "datatype": 7, "shape": [1],
                                        "data": ["a"]}]},
    "text_two_inputs": {"inputs": [{"name": "a", "datatype": "BYTES", "shape": [1], "data": ["x"]},
                                   {"name": "b", "datatype": "BYTES", "shape": [1], "data": ["y"]}]},
    "fp32": {"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 2],
                         "data": [1.5, -2.25, 3e-5, 1e30]}]},
    "fp32_nested": {"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 2],
                                "data": [[1, 2], [3, 4]]}], "outputs": [{"name": "x"}]},
    "fp32_overflow": {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": [1e300]}]},
    "fp16": {"inputs": [{"name": "h", "datatype": "FP16", "shape": [6],
                         "data": [0.0, -0.0, 65504, 6.1e-5, 5.96e-8, 70000]}]},
    "fp64": {"inputs": [{"name": "d", "datatype": "FP64", "shape": [3],
                         "data": [0.1, -1e-308, 1.7976931348623157e308]}]},
    "bool": {"inputs": [{"name": "b", "datatype": "BOOL", "shape": [3], "data": [True, False, True]}]},
    "uint8": {"inputs": [{"name": "u", "datatype": "UINT8", "shape": [3], "data": [0, 255, 256]}]},
    "int8": {"inputs": [{"name": "i", "datatype": "INT8", "shape": [3], "data": [-128, 127, -129]}]},
    "int16": {"inputs": [{"name": "i", "datatype": "INT16", "shape": [2], "data": [-32768, 32767]}]},
    "int32": {"inputs": [{"name": "i", "datatype": "INT32", "shape": [2],
                          "data": [-2147483648, 2147483647]}]},
    "int64": {"inputs": [{"name": "i", "datatype": "INT64", "shape": [3],
                          "data": [-9223372036854775808, 9223372036854775807, 0]}]},
    "uint64_big": {"inputs": [{"name": "i", "datatype": "INT64", "shape": [1],
                               "data": [18446744073709551615]}]},
    "mixed_types": {"inputs": [{"name": "i", "datatype": "INT32", "shape": [3],
                                "data": [1, 2.5, "3"]}]},
    "scalar_shape": {"inputs": [{"name": "s", "datatype": "FP32", "shape": [], "data": [1]}]},
    "zero_shape": {"inputs": [{"name": "z", "datatype": "FP32", "shape": [0, 4], "data": []}]},
    "huge_shape": {"inputs": [{"name": "x", "datatype": "FP32",
                               "shape": [4294967296, 4294967296, 4], "data": [1]}]},
    "negative_shape": {"inputs": [{"name": "x", "datatype": "FP32", "shape": [-1], "data": [1]}]},
    "too_deep": {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1],
                             "data": [[[1]]]}]},
    "bad_datatype": {"inputs": [{"name": "x", "datatype": "BF16", "shape": [1], "data": [1]}]},
    "missing_name": {"inputs": [{"datatype": "FP32", "shape": [1], "data": [1]}]},
    "unknown_output": {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": [1]}],
                       "outputs": [{"name": "y"}]},
    "bad_outputs": {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": [1]}],
                    "outputs": [{"nam": "x"}, 3]},
    "timeout_param": {"inputs": [{"name": "x", "datatype": "INT8", "shape": [1], "data": [1]}],
                      "parameters": {"timeout": 1000000}},
    "bad_timeout": {"inputs": [{"name": "x", "datatype": "INT8", "shape": [1], "data": [1]}],
                    "parameters": {"timeout": -5}},
    "parameters_not_object": {"inputs": [{"name": "x", "datatype": "INT8", "shape": [1],
                                          "data": [1]}], "parameters": []},
    "id_not_string": {"inputs": [{"name": "x", "datatype": "INT8", "shape": [1], "data": [1]}],
                      "id": 5},
    "empty_inputs": {"inputs": []},
    "inputs_not_array": {"inputs": {"name": "x"}},
}
def binary_framed(header: bytes, data: bytes) -> bytes:
    """A fuzz_kserve_json input sent with Inference-Header-Content-Length: its first byte is
    the header's length (the target takes it modulo the rest's length + 1)."""
    assert len(header) < 256
    return bytes([len(header)]) + header + data


KSERVE_RAW = {
    "deep_data": b'{"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":'
                 + b"[" * 300 + b"1" + b"]" * 300 + b"}]}",
    "unicode_name": '{"inputs":[{"name":"ñ\u00e9\u4e2d","datatype":"BOOL","shape":[1],'
                    '"data":[false]}]}'.encode("utf-8"),
    "nan_literal": b'{"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[NaN]}]}',
    "exponent_inf": b'{"inputs":[{"name":"x","datatype":"FP64","shape":[1],"data":[1e400]}]}',
    # Framed for the binary extension: the first byte is the inference header's length.
    "binary_tensor": binary_framed(
        b'{"inputs":[{"name":"x","datatype":"FP32","shape":[2],'
        b'"parameters":{"binary_data_size":8}}],"parameters":{"binary_data_output":true}}',
        b"\x00\x00\x80\x3f\x00\x00\x00\x40"),
    "binary_texts": binary_framed(
        b'{"inputs":[{"name":"text","datatype":"BYTES","shape":[2],'
        b'"parameters":{"binary_data_size":13}}]}',
        b"\x05\x00\x00\x00hello\x00\x00\x00\x00"),
}


# --- HTTP requests ------------------------------------------------------------------------------

def http(method: str, target: str, body: bytes = b"", headers: dict | None = None,
         version: str = "HTTP/1.1", content_length: bool = True) -> bytes:
    lines = [f"{method} {target} {version}", "Host: localhost:8080"]
    hdrs = dict(headers or {})
    if body and "Content-Type" not in hdrs:
        hdrs["Content-Type"] = "application/json"
    if content_length and (body or method in ("POST", "PUT")):
        hdrs.setdefault("Content-Length", str(len(body)))
    lines += [f"{k}: {v}" for k, v in hdrs.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def chunked(body: bytes, size: int = 7) -> bytes:
    out = b""
    for i in range(0, len(body), size):
        part = body[i:i + size]
        out += f"{len(part):x}\r\n".encode() + part + b"\r\n"
    return out + b"0\r\n\r\n"


def http_seeds() -> dict[str, bytes]:
    emb = dumps(OPENAI["batch"])
    tei = dumps(TEI["single"])
    kt = dumps(KSERVE["fp32"])
    kx = dumps(KSERVE["text_bytes"])
    s = {
        "get_models": http("GET", "/v1/models"),
        "get_model": http("GET", "/v1/models/all-MiniLM-L6-v2"),
        "get_model_default": http("GET", "/v1/models/default"),
        "get_model_unknown": http("GET", "/v1/models/%2e%2e"),
        "post_embeddings": http("POST", "/v1/embeddings", emb),
        "post_embeddings_base64": http("POST", "/v1/embeddings", dumps(OPENAI["base64"])),
        "post_embeddings_timeout": http("POST", "/v1/embeddings", emb,
                                        {"X-Request-Timeout-Ms": "250"}),
        "post_embeddings_bad_timeout": http("POST", "/v1/embeddings", emb,
                                            {"X-Request-Timeout-Ms": "-3x"}),
        "post_embeddings_no_cache": http("POST", "/v1/embeddings", emb,
                                         {"Cache-Control": "No-Cache, no-store"}),
        "post_embeddings_chunked": http("POST", "/v1/embeddings", chunked(emb),
                                        {"Transfer-Encoding": "chunked",
                                         "Content-Type": "application/json"},
                                        content_length=False),
        "post_embeddings_expect": http("POST", "/v1/embeddings", emb,
                                       {"Expect": "100-continue"}),
        "post_embeddings_http10": http("POST", "/v1/embeddings", emb, version="HTTP/1.0"),
        "post_embeddings_close": http("POST", "/v1/embeddings", emb, {"Connection": "close"}),
        "post_embeddings_short_body": http("POST", "/v1/embeddings", emb,
                                           {"Content-Length": str(len(emb) + 10)}),
        "post_embed": http("POST", "/embed", tei),
        "post_embed_bad": http("POST", "/embed", b'{"inputs": 5}'),
        "get_info": http("GET", "/info"),
        "get_health": http("GET", "/health"),
        "get_v2": http("GET", "/v2"),
        "get_v2_live": http("GET", "/v2/health/live"),
        "get_v2_ready": http("GET", "/v2/health/ready"),
        "get_v2_model_text": http("GET", "/v2/models/all-MiniLM-L6-v2"),
        "get_v2_model_echo": http("GET", "/v2/models/echo"),
        "get_v2_model_broken": http("GET", "/v2/models/broken/ready"),
        "post_v2_infer_tensor": http("POST", "/v2/models/echo/infer", kt),
        "post_v2_infer_text": http("POST", "/v2/models/all-MiniLM-L6-v2/infer", kx),
        "post_v2_infer_unknown": http("POST", "/v2/models/none/infer", kt),
        "get_metrics": http("GET", "/metrics"),
        "head_models": http("HEAD", "/v1/models"),
        "method_not_allowed": http("DELETE", "/v1/embeddings"),
        "not_found": http("GET", "/v3/nothing?x=1"),
        "query_string": http("GET", "/v1/models?limit=1&after=x"),
        "double_slashes": http("GET", "//v2//models//echo//"),
        "admin_no_key": http("GET", "/admin/cache"),
        "admin_bad_key": http("GET", "/admin/cache", headers={"Authorization": "Bearer nope"}),
        # With an Authorization header the harness requires API keys (http_harness.cc).
        "api_key": http("POST", "/v1/embeddings", emb,
                        {"Authorization": "Bearer fuzz-api-key"}),
        "api_key_bad": http("POST", "/embed", tei, {"Authorization": "Bearer fuzz-api-kex"}),
        "api_key_on_admin": http("GET", "/admin/cache",
                                 headers={"Authorization": "Bearer fuzz-other-key"}),
        "api_key_metrics": http("GET", "/metrics",
                                headers={"Authorization": "Bearer fuzz-api-key"}),
        "admin_key": http("DELETE", "/admin/cache/default",
                          headers={"Authorization": "Bearer fuzz-admin-key"}),
        "admin_basic_auth": http("PUT", "/admin/models/default/precision",
                                 b'{"variant": "int8"}', {"Authorization": "Basic Zm9vOmJhcg=="}),
        "bearer_on_inference": http("POST", "/embed", tei,
                                    {"Authorization": "Bearer fuzz-admin-key"}),
        "pipelined": http("GET", "/health") + http("POST", "/embed", tei)
                     + http("GET", "/v2/health/ready"),
        "pipelined_close": http("GET", "/v2", headers={"Connection": "close"})
                           + http("GET", "/v2"),
        "obs_text_header": http("GET", "/v1/models", headers={"X-Weird": "caf\xe9"}),
        "absolute_target": http("GET", "http://localhost/v1/models"),
        "bad_version": b"GET /v1/models HTTP/2.0\r\nHost: x\r\n\r\n",
        "lf_only": b"GET /health HTTP/1.1\nHost: x\n\n",
        "header_no_colon": b"GET /health HTTP/1.1\r\nHost x\r\n\r\n",
        "two_lengths": http("POST", "/embed", tei, {"Content-Length": f"{len(tei)}, {len(tei)}"}),
        "length_and_chunked": http("POST", "/embed", chunked(tei),
                                   {"Transfer-Encoding": "chunked",
                                    "Content-Length": str(len(tei))}, content_length=False),
        "huge_length": http("POST", "/embed", b"{}", {"Content-Length": "99999999999"}),
        "long_header": http("GET", "/health", headers={"X-Pad": "a" * 17000}),
        "chunk_extension": b"POST /embed HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                           b"5;ext=1\r\n{\"inp\r\n0\r\nTrailer: x\r\n\r\n",
    }
    return s


# --- Tokenizer inputs: byte 0 = max_length choice, byte 1 bit 0 = truncate, rest = text -------

def tokenizer_seeds() -> dict[str, bytes]:
    texts = {
        "ascii": "Hello, world! tail latency under the SLO.",
        "accents": "Héllo wörld, naïve café — déjà vu",
        "cjk": "日本語のテキストと中文字符",
        "emoji": "emoji 🎉🚀 and ZWJ 👩‍👩‍👧",
        "mixed": "ASCII then ünïcödé then ASCII again 12345",
        "specials": "[CLS] literal [SEP] and [MASK] and [UNK] [PAD]",
        "punct": "a.b,c;d:e!f?g(h)i[j]k{l}m<n>o'p\"q`r~s@t#u$v%w^x&y*z",
        "controls": "tab\there\nnewline\r\x00nul\x7fdel\u200bzwsp",
        "combining": "e\u0301 a\u0308 \u0915\u094d\u0937",
        "long": "word " * 400,
        "long_unicode": "ünïcödé " * 200,
        "long_word": "a" * 300,
        "whitespace": " \u00a0\u3000\u2003 ",
        "empty": "",
        "numbers": "3.14159 1,000,000 0x1f 1e10",
        "arabic_hebrew": "مرحبا بالعالم שלום עולם",
        "greek_cyrillic": "ΑΒΓ αβγ Привет мир",
    }
    out: dict[str, bytes] = {}
    for name, text in texts.items():
        out[f"{name}_default"] = bytes([0, 1]) + text.encode("utf-8")
        out[f"{name}_limit16_notrunc"] = bytes([16, 0]) + text.encode("utf-8")
    out["invalid_utf8"] = bytes([0, 1]) + b"ok \xff\xfe \xc3\x28 \xe2\x82 \xf0\x9f\x98 end"
    out["overlong_utf8"] = bytes([9, 1]) + b"\xc0\xaf \xe0\x80\xaf \xed\xa0\x80 surrogate"
    out["limit_edge_values"] = bytes([3, 1]) + b"no room for text"
    out["negative_limit"] = bytes([1, 1]) + b"x"
    out["limit_one"] = bytes([2, 0]) + b"x"
    out["clamped_limit"] = bytes([6, 0]) + ("word " * 300).encode()
    # Pairs (byte 1 bit 1): a cross-encoder's [CLS] a [SEP] b [SEP], cut at 0x1F.
    out["pair_questions"] = bytes([64, 3]) + "How do I learn C++?\x1fWhat is the best way to learn C++?".encode()
    out["pair_both_long"] = bytes([11, 3]) + ("word " * 40 + "\x1f" + "other " * 50).encode()
    out["pair_one_long_notrunc"] = bytes([16, 2]) + ("short\x1f" + "long " * 30).encode()
    out["pair_no_separator"] = bytes([0, 3]) + "half and half, ünïcödé".encode()
    out["pair_too_small_limit"] = bytes([3, 3]) + b"a\x1fb"
    return out


# --- Cached values: the Redis L2 encoding ------------------------------------------------------

def xxh3_64(data: bytes, seed: int) -> int | None:
    """XXH3-64 with a seed, from the system libxxhash (libxxhash-dev, which the build needs)."""
    import ctypes
    import ctypes.util
    name = ctypes.util.find_library("xxhash") or "libxxhash.so.0"
    try:
        lib = ctypes.CDLL(name)
    except OSError:
        return None
    fn = lib.XXH3_64bits_withSeed
    fn.restype = ctypes.c_uint64
    fn.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint64]
    return fn(data, len(data), seed)


def xxh3_available() -> bool:
    return xxh3_64(b"", 0) is not None


def encode_embedding(values: list[float]) -> bytes:
    """src/cache/cached_value.h's format: "TCE1", uint32 count, uint64 XXH3(payload, count)."""
    payload = struct.pack(f"<{len(values)}f", *values)
    checksum = xxh3_64(payload, len(values))
    return b"TCE1" + struct.pack("<IQ", len(values), checksum) + payload


def cached_value_seeds() -> dict[str, bytes]:
    out = {
        "truncated_header": b"TCE1\x03\x00",
        "bad_magic": b"TCE2" + struct.pack("<IQ", 0, 0),
        "huge_count": b"TCE1" + struct.pack("<IQ", 0xFFFFFFFF, 0) + b"\x00" * 16,
        "empty": b"",
    }
    if not xxh3_available():
        # Without the checksum library only the rejects can be written; keep the old files.
        return out
    v384 = [((i * 37) % 101 - 50) / 50.0 for i in range(384)]
    out["valid_384"] = encode_embedding(v384)
    out["valid_1"] = encode_embedding([0.5])
    out["valid_0"] = encode_embedding([])
    out["valid_16"] = encode_embedding([float(i) for i in range(16)])
    good = encode_embedding([1.0, -2.0, 3.5])
    out["bad_checksum"] = good[:8] + bytes([good[8] ^ 1]) + good[9:]
    out["short_payload"] = good[:-1]
    out["long_payload"] = good + b"\x00"
    out["nan_value"] = encode_embedding([1.0, float("nan"), 2.0])
    out["inf_value"] = encode_embedding([float("inf")])
    return out


# --- Config files ------------------------------------------------------------------------------

def config_seeds() -> dict[str, bytes]:
    example = (ROOT / "docs" / "example-config.yaml").read_bytes()
    return {
        "example": example,
        "empty": b"",
        "comment_only": b"# nothing\n",
        "wrong_type": b"server:\n  port: abc\n",
        "out_of_range": b"server:\n  port: 70000\n",
        "unknown_key": b"server:\n  prot: 8080\n",
        "unknown_section": b"telemetry:\n  on: true\n",
        "top_level_list": b"- a\n- b\n",
        "duplicate": b"server:\n  port: 1\n  port: 2\n",
        "bools": b"models:\n  lazy_loading: yes\ncache:\n  enabled: 0\n",
        "nested_too_deep": b"server:\n  port:\n    value: 1\n",
        "anchors": b"a: &x {port: 1}\nserver: *x\n",
        "flow": b"{server: {host: 0.0.0.0, port: 0}, log: {level: debug}}\n",
        "bad_yaml": b"server: [unclosed\n",
        "tabs": b"server:\n\tport: 1\n",
        "null_values": b"server:\n  port: ~\n  host: null\n",
        "binary": b"server: !!binary aGVsbG8=\n",
        "auth": b"auth:\n  admin_keys: a,b\n  rate_limit_per_s: 10\n",
    }


# --- Dictionaries ------------------------------------------------------------------------------

JSON_TOKENS = ['"', "{", "}", "[", "]", ":", ",", "null", "true", "false", "-0", "1e400",
               "\\u0000", "\\ud83d\\ude00", "\\ud800"]
API_KEYS = ["input", "inputs", "model", "encoding_format", "base64", "float", "dimensions",
            "precision", "user", "normalize", "truncate", "truncation_direction", "Right",
            "query", "texts", "raw_scores", "return_text",
            "name", "shape", "datatype", "data", "parameters", "outputs", "id", "timeout",
            "BYTES", "BOOL", "UINT8", "INT8", "INT16", "INT32", "INT64", "FP16", "FP32", "FP64",
            "default", "all-MiniLM-L6-v2", "echo", "broken", "fp32", "int8",
            "binary_data_size", "binary_data", "binary_data_output"]
HTTP_TOKENS = ["GET ", "POST ", "HEAD ", "PUT ", "DELETE ", "OPTIONS ", " HTTP/1.1\r\n",
               " HTTP/1.0\r\n", "\r\n", "\r\n\r\n", "Host: ", "Content-Length: ",
               "Transfer-Encoding: chunked", "Connection: close", "Connection: keep-alive",
               "Expect: 100-continue", "Content-Type: application/json",
               "X-Request-Timeout-Ms: ", "Cache-Control: no-cache", "Cache-Control: no-store",
               "Authorization: Bearer ", "fuzz-admin-key", "fuzz-api-key", "/v1/embeddings", "/v1/models",
               "/embed", "/rerank", "/info", "/health", "/v2", "/v2/health/live", "/v2/health/ready",
               "/v2/models/", "/infer", "/ready", "/metrics", "/admin/cache", "/admin/models/",
               "/precision", "/reload", "0\r\n\r\n", "?", "%2F",
               "Inference-Header-Content-Length: ", "/v2/repository/index", "/config", "/stats"]


# --- KServe v2 gRPC: ModelInferRequest messages, protobuf-encoded by hand ------------------------
# Field numbers from src/server/grpc/grpc_service.proto. Only what the seeds use: varints,
# length-delimited fields (strings, bytes, sub-messages, packed repeated scalars).

def pb_varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # Negative int64s are ten-byte two's complement varints.
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def pb_len(field: int, payload: bytes) -> bytes:
    return pb_varint(field << 3 | 2) + pb_varint(len(payload)) + payload


def pb_packed(field: int, values: list[int]) -> bytes:
    return pb_len(field, b"".join(pb_varint(v) for v in values))


def pb_input(name: str, datatype: str, shape: list[int], contents: bytes = b"") -> bytes:
    body = pb_len(1, name.encode()) + pb_len(2, datatype.encode()) + pb_packed(3, shape)
    return pb_len(5, body + (pb_len(5, contents) if contents else b""))  # inputs = 5


def pb_request(model: str, *inputs: bytes, raw: list[bytes] = (), extra: bytes = b"") -> bytes:
    return (pb_len(1, model.encode()) + b"".join(inputs) + b"".join(pb_len(7, r) for r in raw)
            + extra)


def length_prefixed(*texts: bytes) -> bytes:
    return b"".join(struct.pack("<I", len(t)) + t for t in texts)


def grpc_seeds() -> dict[str, bytes]:
    fp32 = pb_len(6, struct.pack("<4f", 1.0, -2.5, 0.0, 3.25))  # fp32_contents, packed.
    timeout = pb_len(4, pb_len(1, b"timeout") + pb_len(2, pb_varint(2 << 3) + pb_varint(1000)))
    return {
        "text_raw": pb_request("all-MiniLM-L6-v2", pb_input("text", "BYTES", [2]),
                               raw=[length_prefixed(b"hello", "caf\u00e9".encode())]),
        "text_typed": pb_request("m", pb_input("text", "BYTES", [1],
                                               pb_len(8, b"typed text"))),  # bytes_contents
        "fp32_typed": pb_request("imgcls", pb_input("x", "FP32", [2, 2], fp32)),
        "int64_typed": pb_request("mixed", pb_input("ids", "INT64", [3],
                                                    pb_packed(3, [-1, 0, 1 << 40]))),
        "int8_typed_range": pb_request("m", pb_input("x", "INT8", [3], pb_packed(2, [-128, 127, 128]))),
        "uint8_typed": pb_request("m", pb_input("x", "UINT8", [2], pb_packed(4, [0, 255]))),
        "bool_typed": pb_request("m", pb_input("x", "BOOL", [2], pb_packed(1, [1, 0]))),
        "fp16_raw": pb_request("mixed", pb_input("ids", "INT64", [1, 2]), pb_input("scale", "FP16", [1, 2]),
                               raw=[struct.pack("<2q", 5, -5), struct.pack("<2H", 0x3C00, 0xBC00)]),
        "raw_count_mismatch": pb_request("mixed", pb_input("a", "FP32", [1]), pb_input("b", "FP32", [1]),
                                         raw=[struct.pack("<f", 1.0)]),
        "both_typed_and_raw": pb_request("m", pb_input("x", "FP32", [2, 2], fp32), raw=[bytes(16)]),
        "wrapping_shape": pb_request("m", pb_input("x", "INT64", [1 << 61]), raw=[b""]),
        "negative_shape": pb_request("m", pb_input("x", "FP32", [-1]), raw=[b""]),
        "truncated_string": pb_request("m", pb_input("text", "BYTES", [1]), raw=[b"\x09\x00\x00\x00abc"]),
        "timeout_parameter": pb_request("m", pb_input("text", "BYTES", [1]), raw=[length_prefixed(b"t")],
                                        extra=timeout),
    }


def dict_file(tokens: list[str]) -> str:
    lines = []
    for t in dict.fromkeys(tokens):
        esc = "".join(c if 0x20 <= ord(c) < 0x7f and c not in '"\\' else
                      (f"\\{c}" if c in '"\\' else f"\\x{ord(c):02x}") for c in t)
        lines.append(f'"{esc}"')
    return "\n".join(lines) + "\n"


def config_keys() -> list[str]:
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    keys = re.findall(r"^\| `([a-z0-9_.]+)` \|", text, flags=re.M)
    words = set()
    for k in keys:
        words.update(k.split("."))
    return sorted(words) + [": ", "\n  ", "- ", "{", "}", "[", "]", "true", "false", "~", "&a",
                            "*a", "!!str", "0x10", "1e3", "---", "..."]


# --- Encoded images (fuzz_image_decode) --------------------------------------------------------

def png(width: int, height: int, color_type: int, bit_depth: int, rows: bytes,
        extra: list[tuple[bytes, bytes]] = (), interlace: int = 0) -> bytes:
    """A PNG from raw scanlines (each row already starting with its filter byte)."""
    import zlib

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (struct.pack(">I", len(body)) + kind + body
                + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))

    ihdr = struct.pack(">IIBBBBB", width, height, bit_depth, color_type, 0, 0, interlace)
    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
    for kind, body in extra:
        out += chunk(kind, body)
    return out + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def image_seeds() -> dict[str, bytes]:
    rgb = b"".join(b"\x00" + bytes((x * 30 + y * 7) % 256 for x in range(8 * 3)) for y in range(8))
    grey16 = b"".join(b"\x00" + bytes((x * 50 + y) % 256 for x in range(4 * 2)) for y in range(4))
    palette = b"".join(b"\x00" + bytes((x + y) % 3 for x in range(4)) for y in range(4))
    rgba = b"".join(b"\x01" + bytes((x * 11) % 256 for x in range(6 * 4)) for y in range(6))
    # The test fixture (a real 8-bit JPEG from Pillow, tests/image/data/), whole and cut short.
    jpeg = (ROOT / "tests" / "image" / "data" / "pattern.jpg").read_bytes()
    return {
        "png_rgb": png(8, 8, 2, 8, rgb),
        "png_grey16": png(4, 4, 0, 16, grey16),
        "png_palette_trns": png(4, 4, 3, 8, palette,
                                [(b"PLTE", bytes([255, 0, 0, 0, 255, 0, 0, 0, 255])),
                                 (b"tRNS", bytes([255, 128, 0]))]),
        "png_rgba_sub_filter": png(6, 6, 6, 8, rgba),
        "png_interlaced": png(8, 8, 2, 8, rgb, interlace=1),
        "png_header_only_huge": png(50_000, 50_000, 2, 8, b"")[:33],
        "jpeg": jpeg,
        "jpeg_truncated": jpeg[: len(jpeg) // 3],
        "not_an_image": b"GIF89a\x01\x00\x01\x00",
    }


# --- Main --------------------------------------------------------------------------------------

def write_corpus(target: str, seeds: dict[str, bytes]) -> None:
    folder = FUZZ / "corpus" / target
    if target == "fuzz_cached_value" and not xxh3_available():
        print(f"{target}: python xxhash missing, valid values kept as they are")
    else:
        shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in seeds.items():
        (folder / f"seed-{name}").write_bytes(data)
    print(f"{target}: {len(seeds)} seeds")


def main() -> None:
    write_corpus("fuzz_openai_json", {**{k: dumps(v) for k, v in OPENAI.items()}, **OPENAI_RAW})
    write_corpus("fuzz_tei_json", {**{k: dumps(v) for k, v in TEI.items()}, **TEI_RAW})
    write_corpus("fuzz_kserve_json", {**{k: dumps(v) for k, v in KSERVE.items()}, **KSERVE_RAW})
    write_corpus("fuzz_http_request", http_seeds())
    write_corpus("fuzz_tokenizer", tokenizer_seeds())
    write_corpus("fuzz_cached_value", cached_value_seeds())
    write_corpus("fuzz_config_yaml", config_seeds())
    write_corpus("fuzz_kserve_grpc", grpc_seeds())
    write_corpus("fuzz_image_decode", image_seeds())
    (FUZZ / "dict").mkdir(exist_ok=True)
    (FUZZ / "dict" / "json.dict").write_text(
        "# JSON syntax and the API schemas' names (openai, tei, kserve targets).\n"
        + dict_file(JSON_TOKENS + API_KEYS))
    (FUZZ / "dict" / "http.dict").write_text(
        "# HTTP/1.1 framing, routes and headers, plus the JSON tokens (fuzz_http_request).\n"
        + dict_file(HTTP_TOKENS + JSON_TOKENS + API_KEYS))
    (FUZZ / "dict" / "config.dict").write_text(
        "# YAML syntax and the settings' key parts from docs/configuration.md.\n"
        + dict_file(config_keys()))


if __name__ == "__main__":
    main()
