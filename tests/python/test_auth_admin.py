"""Access control and admin routes against the real binary: API keys (Bearer, constant-time
comparison inside the server), per-key rate limits, public/private health and metrics,
admin routes that always need an admin key, cache flush, precision pin and model reload."""

from __future__ import annotations

import requests

from conftest import make_model_repository


def post(s, path, body, key=None, headers=None):
    headers = dict(headers or {})
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return requests.post(s.url(path), json=body, headers=headers, timeout=60)


def test_api_keys_guard_inference_routes(start_server, tmp_path, default_model_dir):
    keys = tmp_path / "keys.txt"
    keys.write_text("# one key per line\nfile-key\nslow-key 2\n")
    repo = make_model_repository(tmp_path / "models")
    s = start_server("--auth.api_keys_file", str(keys), "--auth.admin_keys", "adm-7f3e9c",
                     "--auth.public_metrics=false", env={"TAILCUT_AUTH_API_KEYS": "env-key"},
                     model_repository=repo, name="auth")
    body = {"input": "guarded"}
    r = post(s, "/v1/embeddings", body)
    assert r.status_code == 401 and r.headers["WWW-Authenticate"] == "Bearer"
    assert "missing API key" in r.json()["error"]["message"]
    r = post(s, "/v1/embeddings", body, key="wrong")
    assert r.status_code == 401 and "invalid API key" in r.json()["error"]["message"]
    for key in ("file-key", "env-key", "adm-7f3e9c"):
        assert post(s, "/v1/embeddings", body, key=key).status_code == 200
    # Health stays public; metrics were made private.
    assert requests.get(s.url("/health"), timeout=10).status_code == 200
    assert requests.get(s.url("/metrics"), timeout=10).status_code == 401
    assert requests.get(s.url("/metrics"), headers={"Authorization": "Bearer file-key"},
                        timeout=10).status_code == 200
    # A key with its own rate: 2 requests/s. The first is within it; requests sent back to
    # back then meet a 429 as soon as they outpace 2/s, which any machine does well within 60
    # requests (a generous allowance: real time is inherent to a rate), and that 429 is checked.
    first = post(s, "/v1/embeddings", body, key="slow-key")
    assert first.status_code == 200
    for _ in range(60):
        r = post(s, "/v1/embeddings", body, key="slow-key")
        if r.status_code != 200:
            break
    assert r.status_code == 429, r.text
    assert r.headers["Retry-After"] == "1"
    assert "rate limit" in r.json()["error"]["message"]
    # The keys never reach the log.
    log = s.log_text()
    for secret in ("file-key", "env-key", "slow-key", "adm-7f3e9c"):
        assert secret not in log


def test_admin_routes_need_an_admin_key(start_server, tmp_path):
    repo = make_model_repository(tmp_path / "models")
    s = start_server(model_repository=repo, name="no-admin")
    r = requests.get(s.url("/admin/cache"), timeout=10)
    assert r.status_code == 403 and "auth.admin_keys" in r.json()["error"]["message"]

    s2 = start_server("--auth.admin_keys", "root", env={"TAILCUT_AUTH_API_KEYS": "user"},
                      model_repository=repo, name="admin")
    assert requests.get(s2.url("/admin/cache"), timeout=10).status_code == 401
    r = requests.get(s2.url("/admin/cache"), headers={"Authorization": "Bearer user"}, timeout=10)
    assert r.status_code == 403
    r = requests.get(s2.url("/admin/cache"), headers={"Authorization": "Bearer root"}, timeout=10)
    assert r.status_code == 200 and r.json()["enabled"] is True


def test_cache_flush_precision_pin_and_reload(start_server, tmp_path):
    repo = make_model_repository(tmp_path / "models")
    s = start_server("--auth.admin_keys", "root", model_repository=repo, name="admin-ops")
    admin = {"Authorization": "Bearer root"}
    body = {"input": ["flush me", "and me"]}
    first = post(s, "/v1/embeddings", body)
    assert first.headers["X-Tailcut-Cache-Hits"] == "0"
    assert post(s, "/v1/embeddings", body).headers["X-Tailcut-Cache-Hits"] == "2"
    r = requests.delete(s.url("/admin/cache/default"), headers=admin, timeout=10)
    assert r.status_code == 200 and r.json()["removed"] >= 2
    again = post(s, "/v1/embeddings", body)
    assert again.headers["X-Tailcut-Cache-Hits"] == "0"
    assert again.json()["data"] == first.json()["data"]
    assert requests.delete(s.url("/admin/cache/nope"), headers=admin, timeout=10).status_code == 404

    r = requests.put(s.url("/admin/models/default/precision"), headers=admin,
                     json={"variant": "no-such-variant"}, timeout=10)
    assert r.status_code == 400 and "available" in r.json()["error"]["message"]
    r = requests.put(s.url("/admin/models/default/precision"), headers=admin,
                     json={"variant": "fp32"}, timeout=10)
    assert r.status_code == 200 and r.json()["active_variant"] == "fp32"
    assert r.json()["policy"] in ("pinned", "off")
    r = requests.put(s.url("/admin/models/default/precision"), headers=admin, json={}, timeout=10)
    assert r.status_code == 400

    r = requests.post(s.url("/admin/models/default/reload"), headers=admin, timeout=120)
    assert r.status_code == 200 and r.json()["state"] == "READY"
    after = post(s, "/v1/embeddings", {"input": ["flush me"]}, headers={"Cache-Control": "no-cache"})
    assert after.status_code == 200
    assert after.json()["data"][0]["embedding"] == first.json()["data"][0]["embedding"]
    assert "reloaded" in s.log_text()
