"""A real Prometheus (Debian's `prometheus` package) scraping a real tailcut, with the shipped
monitoring recipe: deploy/prometheus/prometheus.yml's `tailcut` job (its target and intervals
replaced), deploy/prometheus/tailcut-rules.yml loaded, deploy/grafana/tailcut-dashboard.json's
queries and deploy/kubernetes/prometheus-adapter-values.yaml's metric query run through its
HTTP API.

After real requests (/v1/embeddings, some repeated so the cache hits), Prometheus must see
the target up, the request counter moved by exactly the requests sent, finite positive P99s of
every stage, the recording rules evaluated without error, and every dashboard query accepted,
naming only metrics the live server exports (so neither the dashboard nor the rules can rot
when a metric is renamed). `promtool check config` / `check rules` / `test rules` validate the
files offline.

Without the `prometheus` package the tests skip (saying so), except under CI=true, where they
fail: scripts/setup.sh installs it.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
import requests
import yaml
from conftest import (DEFAULT_MODEL_NAME, REPO_ROOT, RedisServer, TailcutServer,
                      _die_with_parent, free_port, make_model_repository, parse_prometheus,
                      wait_until)

DEPLOY = REPO_ROOT / "deploy"
SCRAPE_CONFIG = DEPLOY / "prometheus" / "prometheus.yml"
RULES = DEPLOY / "prometheus" / "tailcut-rules.yml"
RULES_TEST = DEPLOY / "prometheus" / "tailcut-rules.test.yml"
DASHBOARD = DEPLOY / "grafana" / "tailcut-dashboard.json"
ADAPTER_VALUES = DEPLOY / "kubernetes" / "prometheus-adapter-values.yaml"
JOB = "tailcut"
MODEL_STAGES = ("tokenize", "queue", "batch", "infer")
ROUTE_STAGES = ("parse", "serialize", "total")


def _binary(name: str) -> str:
    found = shutil.which(name) or (f"/usr/bin/{name}" if os.access(f"/usr/bin/{name}", os.X_OK)
                                   else None)
    if found:
        return found
    message = f"{name} not found (Debian package prometheus; scripts/setup.sh installs it)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message}; CI=true makes its absence a failure", pytrace=False)
    pytest.skip(f"{message}: apt-get install prometheus to run the Prometheus tests")


def promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([_binary("promtool"), *args], capture_output=True, text=True,
                          timeout=60, cwd=str(REPO_ROOT))


# --- offline: promtool on the shipped files -----------------------------------------------------


def test_promtool_accepts_the_rules():
    r = promtool("check", "rules", str(RULES))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout


def test_promtool_accepts_the_scrape_config():
    # Also checks the rule file it names, resolved relative to the config file.
    r = promtool("check", "config", str(SCRAPE_CONFIG))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "is valid prometheus config file" in r.stdout + r.stderr


def test_rule_unit_tests_pass():
    """tailcut-rules.test.yml: the SLO burn-rate alerts fire on a 50 % slow job and not on a
    0.8 % one, stop after recovery; down, not-ready, 429, 5xx and Redis alerts fire."""
    r = promtool("test", "rules", str(RULES_TEST))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout


# --- PromQL: the metric names an expression reads -----------------------------------------------

_LABEL_LIST_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right"}
_KEYWORDS = _LABEL_LIST_KEYWORDS | {"bool", "and", "or", "unless", "offset", "inf", "nan", "atan2"}
_TOKEN = re.compile(r"""
    (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?:[a-zA-Z]+\d*)*)
  | (?P<id>[a-zA-Z_:][a-zA-Z0-9_:]*)
  | (?P<space>\s+)
  | (?P<op>.)""", re.X | re.S)


def metric_names(expr: str) -> set[str]:
    """The metric names `expr` selects: identifiers that are not label names (inside {...}
    or a by/without/on/ignoring/group_* list), functions or aggregations (followed by '(',
    or by a by/without clause), keywords, numbers, durations or strings."""
    tokens = [(m.lastgroup, m.group()) for m in _TOKEN.finditer(expr) if m.lastgroup != "space"]
    names, braces, brackets, i = set(), 0, 0, 0
    while i < len(tokens):
        kind, text = tokens[i]
        following = tokens[i + 1][1] if i + 1 < len(tokens) else ""
        if kind == "op":
            braces += {"{": 1, "}": -1}.get(text, 0)
            brackets += {"[": 1, "]": -1}.get(text, 0)
        elif kind == "id" and not braces and not brackets:
            if text in _LABEL_LIST_KEYWORDS and following == "(":
                while i < len(tokens) and tokens[i][1] != ")":
                    i += 1
            elif following not in ("(", "by", "without") and text.lower() not in _KEYWORDS:
                names.add(text)
        i += 1
    return names


def test_metric_name_extraction():
    expr = ('histogram_quantile(0.99, sum by (le, route) (rate(a_bucket{le="0.086", x=~"b|c"}'
            '[5m] offset 1h))) / on (job) group_left (model) sum(b_total) > bool 1e-3 '
            'and c:recorded unless sum without (stage) (d) or vector(0) + max by (x) (e)')
    assert metric_names(expr) == {"a_bucket", "b_total", "c:recorded", "d", "e"}


def exported_names(metrics_text: str) -> set[str]:
    """Every series name the exposition declares (histograms' _bucket/_sum/_count), including
    families declared with no sample yet (their series appear once something happens)."""
    names = set()
    for name, fam in parse_prometheus(metrics_text).items():
        names |= ({f"{name}_bucket", f"{name}_sum", f"{name}_count"} if fam.type == "histogram"
                  else {f"{name}_sum", f"{name}_count", name} if fam.type == "summary"
                  else {name})
    return names


# --- the live stack ------------------------------------------------------------------------------


class Prometheus:
    """`prometheus` in the foreground on a temporary config, storage and free loopback port."""

    def __init__(self, folder: Path, config: dict):
        self.folder = folder
        self.config_path = folder / "prometheus.yml"
        self.config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        self.log_path = folder / "prometheus.log"
        self.proc: subprocess.Popen | None = None
        self.port = 0

    def start(self, timeout: float = 30.0) -> "Prometheus":
        binary = _binary("prometheus")
        for _ in range(3):  # The free port may be taken between the probe and the bind.
            self.port = free_port()
            log = open(self.log_path, "ab")
            self.proc = subprocess.Popen(
                [binary, f"--config.file={self.config_path}",
                 f"--storage.tsdb.path={self.folder / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=info"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                cwd=str(self.folder), preexec_fn=_die_with_parent)
            log.close()
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    if requests.get(self.url("/-/ready"), timeout=2).status_code == 200:
                        return self
                except requests.ConnectionError:
                    pass
                time.sleep(0.05)
            self.stop()
        raise AssertionError(f"prometheus did not get ready; log:\n{self.log_tail()}")

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def api(self, path: str, **params):
        r = requests.get(self.url(f"/api/v1/{path}"), params=params, timeout=10)
        body = r.json()
        if body.get("status") != "success":
            raise PromQLError(f"{path} {params}: {r.status_code} {body.get('errorType')}: "
                              f"{body.get('error')}")
        return body["data"]

    def query(self, expr: str) -> list[dict]:
        data = self.api("query", query=expr)
        assert data["resultType"] == "vector", f"{expr}: {data['resultType']}"
        return data["result"]

    def scalar(self, expr: str) -> float:
        """The value of a query answering exactly one sample."""
        result = self.query(expr)
        assert len(result) == 1, f"{expr}: {len(result)} samples: {result}"
        return float(result[0]["value"][1])

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""


class PromQLError(AssertionError):
    pass


@pytest.fixture(scope="module")
def prometheus_binary() -> str:
    return _binary("prometheus")


@pytest.fixture(scope="module")
def target(prometheus_binary, default_model_dir, tmp_path_factory):
    """The scraped server, with Redis and gRPC on, so that every metric the dashboard and the
    rules use is exported (the Redis and gRPC families exist only when those are on)."""
    redis = RedisServer(tmp_path_factory.mktemp("redis")).start()
    repo = make_model_repository(tmp_path_factory.mktemp("models"))
    try:
        with TailcutServer(["--redis.enabled", "--redis.port", str(redis.port)],
                           model_repository=repo, name="scraped", grpc=True,
                           log_dir=tmp_path_factory.mktemp("logs")) as server:
            yield server
    finally:
        redis.kill()


def scrape_config_for(target_address: str) -> dict:
    """The shipped prometheus.yml with its `tailcut` job pointed at the test's server, every
    second, and the shipped rule file by absolute path."""
    config = yaml.safe_load(SCRAPE_CONFIG.read_text())
    jobs = [j for j in config["scrape_configs"] if j["job_name"] == JOB]
    assert len(jobs) == 1, f"{SCRAPE_CONFIG} has no single job named {JOB!r}"
    job = jobs[0]
    assert job.get("metrics_path", "/metrics") == "/metrics"
    assert len(job["static_configs"]) == 1
    job["static_configs"][0]["targets"] = [target_address]
    config["global"].update(scrape_interval="1s", scrape_timeout="1s", evaluation_interval="1s")
    assert [Path(f).name for f in config["rule_files"]] == [RULES.name]
    config["rule_files"] = [str(RULES)]
    config["scrape_configs"] = [job]
    return config


@pytest.fixture(scope="module")
def prometheus(target, tmp_path_factory):
    prom = Prometheus(tmp_path_factory.mktemp("prometheus"),
                      scrape_config_for(f"127.0.0.1:{target.port}")).start()
    try:
        yield prom
    finally:
        prom.stop()
        if os.environ.get("TAILCUT_KEEP_PROMETHEUS_LOG"):
            print(prom.log_tail(200))


def _target_state(prom: Prometheus) -> dict | None:
    targets = prom.api("targets", state="active")["activeTargets"]
    mine = [t for t in targets if t["labels"].get("job") == JOB]
    return mine[0] if len(mine) == 1 and mine[0]["health"] != "unknown" else None


def _counter(prom: Prometheus, expr: str) -> float | None:
    result = prom.query(expr)
    return float(result[0]["value"][1]) if len(result) == 1 else None


def _server_value(server: TailcutServer, name: str, **labels) -> float:
    fams = parse_prometheus(server.metrics())
    base = re.sub(r"_(bucket|sum|count)$", "", name) if name not in fams else name
    return sum(v for n, l, v in fams[base].samples
               if n == name and all(l.get(k) == want for k, want in labels.items()))


REQUESTS_200 = (f'tailcut_requests_total{{job="{JOB}", route="/v1/embeddings", '
                f'model="{DEFAULT_MODEL_NAME}", status="200"}}')
TOTAL_COUNT = (f'tailcut_request_stage_duration_seconds_count{{job="{JOB}", '
               f'route="/v1/embeddings", stage="total"}}')
L1_HITS = f'tailcut_cache_lookups_total{{job="{JOB}", tier="l1", result="hit"}}'


@pytest.fixture(scope="module")
def loaded(target, prometheus, sample_texts):
    """Real load: 32 distinct texts then 16 of them again (cache hits), 4 clients at a time,
    after Prometheus has scraped the series once (a counter's first sample is its baseline:
    an increase from "no series" to the first value is not seen by Prometheus)."""
    assert target.post("/v1/embeddings", {"input": "a warm-up text, before the baseline"}).ok
    wait_until(lambda: _target_state(prometheus), timeout=20, what="the first scrape")
    base = {}
    for name, expr, server_name, labels in (
            ("requests", REQUESTS_200, "tailcut_requests_total",
             dict(route="/v1/embeddings", model=DEFAULT_MODEL_NAME, status="200")),
            ("total_count", TOTAL_COUNT, "tailcut_request_stage_duration_seconds_count",
             dict(route="/v1/embeddings", stage="total")),
            ("hits", L1_HITS, "tailcut_cache_lookups_total", dict(tier="l1", result="hit"))):
        want = _server_value(target, server_name, **labels)
        wait_until(lambda: _counter(prometheus, expr) == want, timeout=20,
                   what=f"Prometheus to scrape {expr} = {want}")
        base[name] = want

    distinct = sample_texts[:32]
    repeats = distinct[:16]
    failures: list[str] = []

    def send(texts: list[str]) -> None:
        chunks = [texts[c::4] for c in range(4)]

        def client(chunk: list[str]) -> None:
            with requests.Session() as session:
                for text in chunk:
                    r = session.post(target.url("/v1/embeddings"), json={"input": text}, timeout=60)
                    if r.status_code != 200:
                        failures.append(f"{r.status_code} {r.text[:200]}")

        threads = [threading.Thread(target=client, args=(chunk,)) for chunk in chunks]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)

    send(distinct)
    send(repeats)  # After the first pass has answered: L1 hits, not single-flight joins.
    assert not failures, failures
    sent = len(distinct) + len(repeats)
    assert _server_value(target, "tailcut_requests_total", route="/v1/embeddings",
                         model=DEFAULT_MODEL_NAME, status="200") == base["requests"] + sent
    wait_until(lambda: _counter(prometheus, REQUESTS_200) == base["requests"] + sent,
               timeout=20, what=f"Prometheus to see the {sent} requests")
    return {"sent": sent, "repeats": len(repeats), "base": base}


# --- what Prometheus sees ------------------------------------------------------------------------


def test_target_is_up(target, prometheus):
    state = wait_until(lambda: _target_state(prometheus), timeout=20, what="a scrape")
    assert state["health"] == "up", state
    assert state["lastError"] == "", state
    assert state["scrapeUrl"] == f"http://127.0.0.1:{target.port}/metrics"
    assert prometheus.scalar(f'up{{job="{JOB}"}}') == 1


def test_counters_count_every_request(prometheus, loaded):
    sent, base = loaded["sent"], loaded["base"]
    assert prometheus.scalar(REQUESTS_200) == base["requests"] + sent
    # One total-stage observation per request.
    wait_until(lambda: _counter(prometheus, TOTAL_COUNT) == base["total_count"] + sent,
               timeout=20, what="the total stage's count to move with the requests")
    # The repeated texts were answered from the in-process cache.
    wait_until(lambda: (_counter(prometheus, L1_HITS) or 0) >= base["hits"] + loaded["repeats"],
               timeout=20, what="the L1 hits of the repeated texts")
    rate = prometheus.scalar(f'sum(rate(tailcut_requests_total{{job="{JOB}", '
                             f'route="/v1/embeddings"}}[1m]))')
    assert rate > 0
    hit_ratio = prometheus.scalar(
        f'sum(rate(tailcut_cache_lookups_total{{job="{JOB}", result="hit"}}[1m])) / '
        f'sum(rate(tailcut_cache_lookups_total{{job="{JOB}"}}[1m]))')
    assert 0 < hit_ratio < 1, hit_ratio


def _quantile(prom: Prometheus, q: float, metric: str, selector: str) -> float:
    return prom.scalar(f"histogram_quantile({q}, sum by (le) "
                       f"(rate({metric}_bucket{{job=\"{JOB}\", {selector}}}[1m])))")


def test_stage_quantiles_are_finite_and_ordered(prometheus, loaded):
    for stage in MODEL_STAGES:
        sel = f'model="{DEFAULT_MODEL_NAME}", stage="{stage}"'
        p50 = _quantile(prometheus, 0.5, "tailcut_stage_duration_seconds", sel)
        p99 = _quantile(prometheus, 0.99, "tailcut_stage_duration_seconds", sel)
        assert math.isfinite(p99) and 0 < p99 < 10, (stage, p99)
        assert 0 < p50 <= p99, (stage, p50, p99)
    route = {}
    for stage in ROUTE_STAGES:
        sel = f'route="/v1/embeddings", stage="{stage}"'
        p50 = _quantile(prometheus, 0.5, "tailcut_request_stage_duration_seconds", sel)
        p99 = _quantile(prometheus, 0.99, "tailcut_request_stage_duration_seconds", sel)
        assert math.isfinite(p99) and 0 < p99 < 10, (stage, p99)
        assert 0 < p50 <= p99, (stage, p50, p99)
        route[stage] = p99
    # Every request's total includes its parse and serialize stages, so the quantile of the
    # totals (same buckets) cannot be below theirs.
    assert route["total"] >= route["parse"] and route["total"] >= route["serialize"], route
    batch_p99 = _quantile(prometheus, 0.99, "tailcut_batch_size", f'model="{DEFAULT_MODEL_NAME}"')
    assert 0 < batch_p99 <= 64, batch_p99  # --max-batch-size default
    assert prometheus.scalar(f'sum(tailcut_precision_active{{job="{JOB}", '
                             f'model="{DEFAULT_MODEL_NAME}"}})') == 1  # One variant serves.
    assert prometheus.scalar(f'tailcut_queue_rows{{job="{JOB}", '
                             f'model="{DEFAULT_MODEL_NAME}"}}') >= 0


def _rules_file_rules() -> list[dict]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def test_rules_evaluate_on_the_live_series(prometheus, loaded):
    shipped = _rules_file_rules()

    def evaluated():
        groups = prometheus.api("rules")["groups"]
        rules = [r for g in groups for r in g["rules"]]
        done = all(not r["lastEvaluation"].startswith("0001-") for r in rules)
        return rules if len(rules) == len(shipped) and done else None

    rules = wait_until(evaluated, timeout=20, what="every shipped rule to be evaluated")
    bad = [(r["name"], r.get("health"), r.get("lastError")) for r in rules if r["health"] != "ok"]
    assert not bad, bad
    # The recorded P99s: finite and positive once the load is in their window.
    for expr in (f'tailcut:request_stage_duration_seconds:p99_5m{{job="{JOB}", '
                 f'route="/v1/embeddings", stage="total"}}',
                 f'tailcut:stage_duration_seconds:p99_5m{{job="{JOB}", '
                 f'model="{DEFAULT_MODEL_NAME}", stage="infer"}}'):
        value = wait_until(lambda: _counter(prometheus, expr), timeout=20, what=expr)
        assert math.isfinite(value) and value > 0, (expr, value)
    slo = f'tailcut:slo_slow_requests:ratio_rate5m{{job="{JOB}"}}'
    slow = wait_until(lambda: _counter(prometheus, slo) is not None, timeout=20, what=slo) and \
        _counter(prometheus, slo)
    assert 0 <= slow <= 1, slow  # The share of embedding requests slower than 86 ms.
    # Nothing is down, not ready, refused or failing here, and no alert's `for` can have
    # passed within this test.
    alerts = prometheus.api("alerts")["alerts"]
    assert not [a for a in alerts if a["state"] == "firing"], alerts
    quiet = {"TailcutDown", "TailcutNotReady", "TailcutHigh429Rate", "TailcutHigh5xxRate",
             "TailcutRedisCircuitOpen"}
    assert not [a for a in alerts if a["labels"]["alertname"] in quiet], alerts


def test_rules_name_only_exported_metrics(target):
    exported = exported_names(target.metrics())
    recorded = {r["record"] for r in _rules_file_rules() if "record" in r}
    for rule in _rules_file_rules():
        names = metric_names(rule["expr"])
        assert names, f"{rule}: reads no metric"
        unknown = names - exported - recorded - {"up"}
        assert not unknown, f"{rule.get('record') or rule.get('alert')}: {sorted(unknown)} not " \
                            f"exported by tailcut's /metrics"


# --- the Grafana dashboard -----------------------------------------------------------------------

_BUILTIN_VARIABLES = {"__rate_interval": "1m", "__interval": "15s", "__range": "5m"}
_VARIABLE = re.compile(r"\$(?:\{(\w+)(?::\w+)?\}|(\w+))")
_REGEX_MATCHER = re.compile(r'(?:=~|!~)\s*"(?:[^"\\]|\\.)*"')


def dashboard_queries() -> list[tuple[str, str]]:
    """(where, PromQL) for every panel target and every query variable."""
    dashboard = json.loads(DASHBOARD.read_text())
    out = []

    def walk(panels):
        for p in panels:
            for t in p.get("targets", []):
                out.append((f"panel {p['title']!r} target {t['refId']}", t["expr"]))
            walk(p.get("panels", []))

    walk(dashboard["panels"])
    for v in dashboard["templating"]["list"]:
        if v["type"] == "query":
            query = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            m = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", query)
            assert m, f"variable {v['name']}: {query!r} is not label_values(selector, label)"
            out.append((f"variable {v['name']}", m.group(1)))
    return out


def grafana_substitute(expr: str, where: str) -> str:
    """The query Grafana sends with every variable at "All" (allValue ".*"). A variable may
    only stand inside a regex matcher (=~ / !~), where ".*" and a '|'-joined selection mean
    what they should; anywhere else "All" would break the query."""
    regex_spans = [m.span() for m in _REGEX_MATCHER.finditer(expr)]
    for m in _VARIABLE.finditer(expr):
        name = m.group(1) or m.group(2)
        if name in _BUILTIN_VARIABLES:
            continue
        assert any(a <= m.start() < b for a, b in regex_spans), \
            f"{where}: ${name} outside a =~ / !~ matcher: {expr}"
    return _VARIABLE.sub(lambda m: _BUILTIN_VARIABLES.get(m.group(1) or m.group(2), ".*"), expr)


def test_dashboard_structure():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["title"]
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for p in panels:
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        assert p["targets"], p["title"]
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs)), p["title"]
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24, p["title"]
    titles = " | ".join(p["title"] for p in panels).lower()
    for want in ("p50", "p99", "stage", "batch size", "queue depth", "cache hit rate",
                 "precision variant", "request rate per model", "error rate per model"):
        assert want in titles, f"no panel about {want!r}"


def test_dashboard_queries_run_on_live_prometheus(target, prometheus, loaded):
    exported = exported_names(target.metrics())
    queries = dashboard_queries()
    assert len(queries) >= 20
    answered: dict[str, list] = {}
    for where, expr in queries:
        names = metric_names(expr)
        assert names, f"{where}: reads no metric: {expr}"
        unknown = names - exported - {"up"}
        assert not unknown, f"{where}: {sorted(unknown)} not exported by tailcut's /metrics: {expr}"
        promql = grafana_substitute(expr, where)
        if where.startswith("variable"):
            promql = f"group({promql})"
        try:
            answered[where] = prometheus.query(promql)
        except PromQLError as e:
            pytest.fail(f"{where}: Prometheus refused the query: {e}\n{promql}", pytrace=False)
    # The panels about the load just sent show numbers, not "No data" (their first query at
    # least: a panel's other queries may be about what this server does not run, such as
    # generation).
    for title in ("Request rate per model", "Error rate per model (5xx and 429)",
                  "Model stages P50", "Model stages P99",
                  "End-to-end P50 / P99 per route (SLO 86 ms)",
                  "Route stages P99 (parse, serialize, total)", "Batch size (rows per batch)",
                  "Queue depth", "Cache hit rate", "Precision variant in use",
                  "Requests within the 86 ms SLO", "Targets up"):
        where = f"panel {title!r} target A"
        assert where in answered, f"no panel titled {title!r}"
        finite = [s for s in answered[where] if math.isfinite(float(s["value"][1]))]
        assert finite, f"{where}: no finite value after the load: {answered[where]}"
    for where in ("variable instance", "variable model", "variable route"):
        assert answered[where], f"{where}: no values"


def test_prometheus_adapter_query_runs(target, prometheus, loaded):
    """The HPA's custom metric, as prometheus-adapter would query it for one pod (the
    adapter's <<.LabelMatchers>> select namespace and pod; here the job)."""
    rule = yaml.safe_load(ADAPTER_VALUES.read_text())["rules"]["custom"][0]
    series = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", rule["seriesQuery"]).group()
    assert series in exported_names(target.metrics())
    assert re.fullmatch(rule["name"]["matches"], series)
    query = (rule["metricsQuery"].replace("<<.Series>>", series)
             .replace("<<.LabelMatchers>>", f'job="{JOB}"').replace("<<.GroupBy>>", "instance"))
    assert "<<" not in query, query
    result = prometheus.query(query)
    assert len(result) == 1, result
    value = float(result[0]["value"][1])
    assert math.isfinite(value) and value >= 0, value
