"""The deployment recipes under deploy/ (docs/deployment.md), validated offline: this machine
has no container runtime and no Kubernetes, so what can be checked without them is, against
the real parts that are here:

* Kubernetes (deploy/kubernetes/): every object validates against Kubernetes' own OpenAPI
  schemas (kubernetes-validate, strict: a misspelt field fails); the numbers that must agree
  do (probe paths and ports, container ports, the Service, `--threads` = the CPU request, the
  termination grace period >= preStop + the server's drain, the HPA's metric = the
  prometheus-adapter rule's, the Redis address); every flag and config key is one
  `tailcut serve` knows, and the real server starts and gets ready on the ConfigMap's file.
* systemd (deploy/systemd/): `systemd-analyze verify` accepts the unit (on a copy whose
  ExecStart names the built binary, which verify requires to exist) and reports nothing;
  `systemd-analyze security --offline` rates it OK; TimeoutStopSec covers the drain; the real
  server starts on its ExecStart arguments and config.yaml.
* Containerfile (deploy/): the runtime stage installs the Debian package of every shared
  library `ldd build/tailcut` resolves (dpkg -S) and copies the one that has none (ONNX
  Runtime), and nothing else; its HEALTHCHECK command, run against a live server, says ready
  (and fails on a closed port); its ports, user, volume and command agree with the rest.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import (REPO_ROOT, TailcutServer, free_port, make_model_repository,
                      require_tailcut_binary)

DEPLOY = REPO_ROOT / "deploy"
K8S = DEPLOY / "kubernetes"
CONTAINERFILE = DEPLOY / "Containerfile"
UNIT = DEPLOY / "systemd" / "tailcut.service"
UNIT_CONFIG = DEPLOY / "systemd" / "config.yaml"
DOCS = REPO_ROOT / "docs" / "deployment.md"
KUBERNETES_VERSION = "1.30.0"  # The oldest release still supported upstream when written.
NOT_OBJECTS = {"kustomization.yaml", "prometheus-adapter-values.yaml"}  # Kustomize, Helm.
CRD_OBJECTS = {"podmonitor.yaml"}  # Prometheus Operator: no schema in Kubernetes itself.
# In debian:bookworm-slim already: the C library, and what dpkg and apt themselves link.
BASE_IMAGE_PACKAGES = {"libc6", "libgcc-s1", "zlib1g"}


# --- what `tailcut serve` accepts ----------------------------------------------------------------


class ServeHelp:
    """`tailcut serve --help`, parsed: every flag, the setting each short flag stands for
    ("Same as --server.port"), and each setting's default."""

    def __init__(self, text: str):
        self.flags: set[str] = set()
        self.aliases: dict[str, str] = {}
        self.defaults: dict[str, str] = {}
        entries = re.split(r"\n(?=  (?:-\w,)?--)", text)
        for entry in entries:
            m = re.match(r"\s*(?:-\w,)?--([\w.-]+)(?:\s+(?:\w+|\[=BOOL\])(?:=(\S+))?)?", entry)
            if not m:
                continue
            flag = m.group(1)
            self.flags.add(flag)
            same = re.search(r"Same as --([\w.]+)\.", entry)
            if same:
                self.aliases[flag] = same.group(1)
            if "." in flag and m.group(2) is not None:
                self.defaults[flag] = m.group(2)
            if "." in flag and "(default true)" in entry:
                self.defaults[flag] = "true"
        self.settings = {f for f in self.flags if "." in f}

    def setting(self, flag: str) -> str | None:
        return flag if flag in self.settings else self.aliases.get(flag)


@pytest.fixture(scope="module")
def serve_help() -> ServeHelp:
    r = subprocess.run([str(require_tailcut_binary()), "serve", "--help"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    parsed = ServeHelp(r.stdout)
    assert {"host", "port", "grpc-port", "threads", "config"} <= parsed.flags, parsed.flags
    assert parsed.aliases["threads"] == "engine.intra_op_threads", parsed.aliases
    assert parsed.defaults["server.shutdown_grace_millis"] == "10000", parsed.defaults
    return parsed


def parse_flags(args: list[str], serve_help: ServeHelp) -> dict[str, str]:
    """`serve --flag value --other=value ...` as {flag: value}; every flag must exist."""
    assert args and args[0] == "serve", args
    flags, i = {}, 1
    while i < len(args):
        arg = args[i]
        assert arg.startswith("--"), f"{arg!r} in {args}: not a flag"
        name, eq, value = arg[2:].partition("=")
        assert name in serve_help.flags, f"--{name} is not a flag of tailcut serve"
        if not eq:
            i += 1
            value = args[i]
        flags[name] = value
        i += 1
    return flags


def flatten(tree: dict, prefix: str = "") -> dict[str, object]:
    out = {}
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, path + "."))
        else:
            out[path] = value
    return out


def effective(serve_help: ServeHelp, config: dict, flags: dict[str, str]) -> dict[str, str]:
    """Settings as the server resolves them: defaults < config file < flags."""
    settings = dict(serve_help.defaults)
    for key, value in flatten(config).items():
        assert key in serve_help.settings, f"config key {key} is not a tailcut setting"
        settings[key] = str(value).lower() if isinstance(value, bool) else str(value)
    for flag, value in flags.items():
        if flag != "config":
            settings[serve_help.setting(flag)] = value
    return settings


def drain_seconds(settings: dict[str, str]) -> float:
    """SIGTERM to exit at the longest: the accept delay, then the grace for requests in
    flight (src/cli/serve_command.cc)."""
    grace = int(settings["server.shutdown_grace_millis"])
    delay = min(int(settings["server.shutdown_delay_millis"]), grace)
    return (delay + grace) / 1000


# --- Kubernetes ----------------------------------------------------------------------------------


def k8s_objects() -> dict[tuple[str, str], dict]:
    """(kind, name) -> object for every object file kustomization.yaml lists."""
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    objects = {}
    for name in kustomization["resources"]:
        for doc in yaml.safe_load_all((K8S / name).read_text()):
            if doc:
                objects[(doc["kind"], doc["metadata"]["name"])] = doc
    return objects


def test_kustomization_lists_every_object_file():
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    files = {p.name for p in K8S.glob("*.yaml")}
    assert set(kustomization["resources"]) == files - NOT_OBJECTS - CRD_OBJECTS
    for name in files:  # Every file is YAML, whatever it is.
        assert list(yaml.safe_load_all((K8S / name).read_text())), name


def test_objects_validate_against_kubernetes_schemas():
    try:
        import kubernetes_validate
    except ImportError:
        pytest.fail("kubernetes-validate is missing from .venv: run scripts/setup.sh "
                    "(tools/requirements.txt pins it)", pytrace=False)
    objects = k8s_objects()
    assert {k for k, _ in objects} >= {"ConfigMap", "Deployment", "Service",
                                       "HorizontalPodAutoscaler", "StatefulSet",
                                       "PodDisruptionBudget"}
    for (kind, name), obj in objects.items():
        try:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as e:
            pytest.fail(f"{kind}/{name}: {e.path}: {e.message}", pytrace=False)
    # The schemas do reject a misspelt field (strict).
    broken = json.loads(json.dumps(objects[("Deployment", "tailcut")]))
    broken["spec"]["template"]["spec"]["terminationGracePeriodSecond"] = 20
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


def _deployment():
    objects = k8s_objects()
    deployment = objects[("Deployment", "tailcut")]
    pod = deployment["spec"]["template"]
    (container,) = [c for c in pod["spec"]["containers"] if c["name"] == "tailcut"]
    config = yaml.safe_load(objects[("ConfigMap", "tailcut-config")]["data"]["config.yaml"])
    return objects, deployment, pod, container, config


def _container_port(container: dict, port) -> int:
    if isinstance(port, int):
        return port
    (match,) = [p["containerPort"] for p in container["ports"] if p["name"] == port]
    return match


def _matches(selector: dict, labels: dict) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def test_deployment_flags_ports_probes_and_service_agree(serve_help):
    objects, deployment, pod, container, config = _deployment()
    flags = parse_flags(container["args"], serve_help)
    settings = effective(serve_help, config, flags)
    assert settings["server.host"] == "0.0.0.0"
    http, grpc = int(settings["server.port"]), int(settings["server.grpc_port"])
    assert (http, grpc) == (8080, 8001)
    assert _container_port(container, "http") == http
    assert _container_port(container, "grpc") == grpc
    ready, live = container["readinessProbe"]["httpGet"], container["livenessProbe"]["httpGet"]
    assert ready["path"] == "/v2/health/ready" and _container_port(container, ready["port"]) == http
    assert live["path"] == "/v2/health/live" and _container_port(container, live["port"]) == http
    assert int(pod["metadata"]["annotations"]["prometheus.io/port"]) == http
    assert _matches(deployment["spec"]["selector"]["matchLabels"], pod["metadata"]["labels"])
    # The config file is where --config says, from the ConfigMap.
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == "config"]
    (volume,) = [v for v in pod["spec"]["volumes"] if v["name"] == "config"]
    assert flags["config"] == f"{mount['mountPath']}/config.yaml"
    assert volume["configMap"]["name"] == "tailcut-config"
    # The Service reaches both ports of ready pods.
    service = objects[("Service", "tailcut")]
    assert _matches(service["spec"]["selector"], pod["metadata"]["labels"])
    ports = {p["name"]: p for p in service["spec"]["ports"]}
    assert set(ports) == {"http", "grpc"}
    for name, number in (("http", http), ("grpc", grpc)):
        assert ports[name]["port"] == number
        assert _container_port(container, ports[name]["targetPort"]) == number
    pdb = objects[("PodDisruptionBudget", "tailcut")]
    assert _matches(pdb["spec"]["selector"]["matchLabels"], pod["metadata"]["labels"])


def _cpus(quantity: str) -> float:
    return int(quantity[:-1]) / 1000 if str(quantity).endswith("m") else float(quantity)


def test_cpu_request_matches_threads(serve_help):
    _, _, _, container, config = _deployment()
    settings = effective(serve_help, config, parse_flags(container["args"], serve_help))
    threads = int(settings["engine.intra_op_threads"])
    assert threads > 0, "set --threads explicitly: the CPU request is sized for it"
    resources = container["resources"]
    assert _cpus(resources["requests"]["cpu"]) == threads
    # Guaranteed QoS (requests = limits): whole cores with the static CPU manager.
    assert resources["limits"]["cpu"] == resources["requests"]["cpu"]
    assert resources["limits"]["memory"] == resources["requests"]["memory"]


def test_termination_grace_covers_prestop_and_drain(serve_help):
    _, _, pod, container, config = _deployment()
    settings = effective(serve_help, config, parse_flags(container["args"], serve_help))
    command = container["lifecycle"]["preStop"]["exec"]["command"]
    assert command[0] == "sleep" and len(command) == 2, command
    pre_stop = float(command[1])
    assert pre_stop >= 1, "without a preStop pause, routers still send to a draining pod"
    grace = pod["spec"]["terminationGracePeriodSeconds"]
    needed = pre_stop + drain_seconds(settings) + 1  # + exiting after the drain
    assert grace >= needed, f"terminationGracePeriodSeconds {grace} < {needed}"


def test_hpa_scales_the_deployment_on_the_adapter_metric():
    objects = k8s_objects()
    hpa = objects[("HorizontalPodAutoscaler", "tailcut")]
    ref = hpa["spec"]["scaleTargetRef"]
    assert (ref["kind"], ref["name"]) == ("Deployment", "tailcut")
    assert 1 <= hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]
    pods_metrics = [m["pods"]["metric"]["name"] for m in hpa["spec"]["metrics"]
                    if m["type"] == "Pods"]
    adapter = yaml.safe_load((K8S / "prometheus-adapter-values.yaml").read_text())
    served = {r["name"]["as"] for r in adapter["rules"]["custom"]}
    assert pods_metrics and set(pods_metrics) <= served, (pods_metrics, served)
    for rule in adapter["rules"]["custom"]:
        assert set(rule["resources"]["overrides"]) == {"namespace", "pod"}
        for placeholder in ("<<.Series>>", "<<.LabelMatchers>>", "<<.GroupBy>>"):
            assert placeholder in rule["metricsQuery"]


def test_podmonitor_scrapes_the_http_port_as_job_tailcut():
    _, _, pod, container, _ = _deployment()
    (monitor,) = list(yaml.safe_load_all((K8S / "podmonitor.yaml").read_text()))
    assert (monitor["apiVersion"], monitor["kind"]) == ("monitoring.coreos.com/v1", "PodMonitor")
    assert _matches(monitor["spec"]["selector"]["matchLabels"], pod["metadata"]["labels"])
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["path"] == "/metrics"
    assert _container_port(container, endpoint["port"]) == 8080
    # The job label the rules and dashboard select.
    assert pod["metadata"]["labels"][monitor["spec"]["jobLabel"]] == "tailcut"


def test_redis_statefulset_is_where_the_config_points():
    objects = k8s_objects()
    _, _, _, _, config = _deployment()
    redis = config["redis"]
    assert redis["enabled"] is True
    statefulset = objects[("StatefulSet", "tailcut-redis")]
    service = objects[("Service", statefulset["spec"]["serviceName"])]
    assert service["spec"]["clusterIP"] == "None"  # Headless: the StatefulSet's identity.
    assert redis["host"] == service["metadata"]["name"]
    (port,) = service["spec"]["ports"]
    assert redis["port"] == port["port"]
    pod = statefulset["spec"]["template"]
    assert _matches(service["spec"]["selector"], pod["metadata"]["labels"])
    assert _matches(statefulset["spec"]["selector"]["matchLabels"], pod["metadata"]["labels"])
    (container,) = pod["spec"]["containers"]
    assert _container_port(container, port["targetPort"]) == redis["port"]


# --- the real server on each recipe's arguments and config --------------------------------------


def _containerfile_stages() -> list[list[tuple[str, str]]]:
    """[[(INSTRUCTION, arguments), ...] per stage], continuation lines joined."""
    lines = [line for line in CONTAINERFILE.read_text().splitlines()
             if not line.lstrip().startswith("#")]
    text = re.sub(r"\\\n", " ", "\n".join(lines))
    stages: list[list[tuple[str, str]]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        instruction, _, rest = line.strip().partition(" ")
        instruction = instruction.upper()
        if instruction == "FROM":
            stages.append([])
        stages[-1].append((instruction, rest.strip()))
    return stages


def _exec_form(arguments: str) -> list[str]:
    value = json.loads(arguments)
    assert isinstance(value, list), f"use the exec (JSON) form: {arguments}"
    return value


def _unit() -> dict[str, dict[str, list[str]]]:
    """systemd's unit syntax: [Section] Key=Value, keys may repeat."""
    sections: dict[str, dict[str, list[str]]] = {}
    current = None
    for line in UNIT.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
            continue
        key, _, value = line.partition("=")
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def recipe_launches(serve_help: ServeHelp) -> dict[str, tuple[list[str], Path | None]]:
    """Each recipe's `tailcut serve` arguments and the config file it reads (the repository's
    copy of the file that recipe installs)."""
    _, _, _, container, _ = _deployment()
    runtime = _containerfile_stages()[-1]
    (cmd,) = [_exec_form(a) for i, a in runtime if i == "CMD"]
    exec_start = shlex.split(_unit()["Service"]["ExecStart"][0])
    return {"kubernetes": (container["args"], K8S / "configmap.yaml"),
            "systemd": (exec_start[1:], UNIT_CONFIG),
            "container": (cmd, None)}


@pytest.mark.parametrize("recipe", ["kubernetes", "systemd", "container"])
def test_recipe_starts_the_real_server(recipe, serve_help, tmp_path, default_model_dir):
    """The server gets ready on the recipe's own arguments and config file, less the listen
    address and ports (loopback and free ones here) and with the test's model folder."""
    args, config_source = recipe_launches(serve_help)[recipe]
    flags = parse_flags(args, serve_help)
    extra: list[str] = []
    if config_source is not None:
        text = config_source.read_text()
        if config_source.name == "configmap.yaml":
            text = yaml.safe_load(text)["data"]["config.yaml"]
        config_path = tmp_path / "config.yaml"
        config_path.write_text(text)
        extra += ["--config", str(config_path)]
        effective(serve_help, yaml.safe_load(text), flags)  # Every key is a setting.
    dropped = {"config", "host", "port", "grpc-port", "model-repository",
               "server.host", "server.port", "server.grpc_port", "models.repository"}
    for flag, value in flags.items():
        if flag not in dropped:
            extra += [f"--{flag}", value]
    # No Redis here (the Kubernetes recipe's is a StatefulSet): the cache tests cover it.
    server = TailcutServer([*extra, "--redis.enabled=false"], name=f"recipe-{recipe}",
                           log_dir=tmp_path,
                           model_repository=make_model_repository(tmp_path / "models"))
    with server:
        assert server.get("/v2/health/ready").status_code == 200
        assert server.get("/v2/health/live").status_code == 200
        assert server.post("/v1/embeddings", {"input": "deployed"}).status_code == 200
    assert "stopped cleanly" in server.log_text()


# --- systemd -------------------------------------------------------------------------------------


def _systemd_analyze() -> str:
    found = shutil.which("systemd-analyze")
    if not found:
        message = "systemd-analyze not found (Debian package systemd)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{message}; CI=true makes its absence a failure", pytrace=False)
        pytest.skip(message)
    return found


def _verify(unit_text: str, folder: Path) -> str:
    """Output of `systemd-analyze verify` on the unit: empty when it found nothing. It
    exits 0 on unknown keys and bad values (it only warns), so any line counts."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / UNIT.name
    path.write_text(unit_text)
    r = subprocess.run([_systemd_analyze(), "verify", str(path)], capture_output=True,
                       text=True, timeout=60)
    return (f"exit {r.returncode}\n" if r.returncode else "") + r.stdout + r.stderr


def _unit_for_this_machine() -> str:
    """The unit with ExecStart's binary replaced by the built one: verify checks that the
    binary exists and is executable."""
    text = UNIT.read_text()
    binary = shlex.split(_unit()["Service"]["ExecStart"][0])[0]
    assert binary == "/usr/local/bin/tailcut", binary
    return text.replace(f"ExecStart={binary} ", f"ExecStart={require_tailcut_binary()} ")


def test_systemd_unit_verifies(tmp_path):
    text = _unit_for_this_machine()
    assert _verify(text, tmp_path / "good") == ""
    # And verify does catch what it should (so an empty answer means something).
    assert "Unknown key" in _verify(text.replace("[Service]\n", "[Service]\nTimeoutStopSecs=15\n"),
                                    tmp_path / "typo")
    assert "is not executable" in _verify(
        text.replace(str(require_tailcut_binary()), "/nonexistent/tailcut"), tmp_path / "binary")


def test_systemd_unit_is_hardened_and_waits_for_the_drain(serve_help, tmp_path):
    service = _unit()["Service"]
    one = {k: v[-1] for k, v in service.items()}
    for key, want in {"DynamicUser": "yes", "ProtectSystem": "strict", "NoNewPrivileges": "yes",
                      "PrivateTmp": "yes", "ProtectHome": "yes", "PrivateDevices": "yes",
                      "KillSignal": "SIGTERM", "CapabilityBoundingSet": ""}.items():
        assert one.get(key) == want, f"{key}={one.get(key)!r}, want {want!r}"
    exec_start = shlex.split(one["ExecStart"])
    assert Path(exec_start[0]).name == "tailcut"
    flags = parse_flags(exec_start[1:], serve_help)
    assert flags["config"].startswith(f"/etc/{one['ConfigurationDirectory']}/")
    settings = effective(serve_help, yaml.safe_load(UNIT_CONFIG.read_text()), flags)
    assert int(re.fullmatch(r"(\d+)s?", one["TimeoutStopSec"]).group(1)) >= \
        drain_seconds(settings) + 1
    # systemd's own rating of the sandbox.
    path = tmp_path / UNIT.name
    path.write_text(_unit_for_this_machine())
    r = subprocess.run([_systemd_analyze(), "security", "--offline=yes", str(path)],
                       capture_output=True, text=True, timeout=60)
    m = re.search(r"Overall exposure level for \S+: ([\d.]+) (\w+)", r.stdout + r.stderr)
    assert m, r.stdout + r.stderr
    assert float(m.group(1)) <= 2.0, f"exposure {m.group(1)} {m.group(2)}"


# --- Containerfile -------------------------------------------------------------------------------


def _runtime_packages(runtime) -> set[str]:
    packages = set()
    for instruction, arguments in runtime:
        if instruction == "RUN" and "apt-get install" in arguments:
            after = arguments.split("apt-get install", 1)[1].split("&&")[0]
            packages |= {w for w in after.split() if not w.startswith("-")}
    return packages


def _ldd(binary: Path) -> list[tuple[str, str | None]]:
    r = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    libs = []
    for line in r.stdout.splitlines():
        line = line.strip()
        assert "not found" not in line, f"ldd: {line}"
        m = re.match(r"(\S+) => (\S+) \(", line) or re.match(r"(/\S+) \(", line)
        if m:
            libs.append((Path(m.group(1)).name, m.group(2) if m.lastindex == 2 else m.group(1)))
    return libs


def _debian_packages(paths: list[str]) -> dict[str, str]:
    """path -> the Debian package holding it (dpkg -S, one call), for those that have one."""
    candidates: dict[str, str] = {}
    for path in paths:
        for p in {path, os.path.realpath(path)}:
            # usrmerge: /lib is /usr/lib, and dpkg knows each file under one of the two names.
            for alias in (p, p.replace("/usr/lib/", "/lib/", 1),
                          p.replace("/lib/", "/usr/lib/", 1)):
                candidates.setdefault(alias, path)
    r = subprocess.run(["dpkg", "-S", *candidates], capture_output=True, text=True, timeout=120)
    found = {}
    for line in r.stdout.splitlines():  # "libfoo1:amd64: /usr/lib/.../libfoo.so.1"
        packages, _, file = line.rpartition(": ")
        if file in candidates:
            found[candidates[file]] = packages.split(",")[0].split(":")[0].strip()
    return found


def test_runtime_stage_has_exactly_the_libraries_ldd_needs(tailcut_bin):
    if not shutil.which("dpkg"):
        pytest.skip("not a Debian machine (no dpkg): the image is built on Debian bookworm")
    runtime = _containerfile_stages()[-1]
    listed = _runtime_packages(runtime)
    copied = " ".join(a for i, a in runtime if i == "COPY")
    needed: dict[str, list[str]] = {}
    libraries = _ldd(tailcut_bin)
    packages = _debian_packages([path for _, path in libraries])
    for name, path in libraries:
        package = packages.get(path)
        if package is None:
            # From outside Debian (ONNX Runtime from npm): the image must carry the file.
            assert re.search(rf"/{re.escape(name)}\b", copied), \
                f"{name} ({path}) has no Debian package and the runtime stage does not COPY it"
            continue
        needed.setdefault(package, []).append(name)
    missing = set(needed) - BASE_IMAGE_PACKAGES - listed
    assert not missing, {p: needed[p] for p in missing}
    unneeded = listed - set(needed)
    assert not unneeded, f"the runtime stage installs packages the binary does not load: {unneeded}"


def test_containerfile_stages_and_settings(serve_help):
    stages = _containerfile_stages()
    assert len(stages) >= 2
    build, runtime = stages[0], stages[-1]
    assert re.fullmatch(r"debian:bookworm AS build", build[0][1], re.I), build[0]
    assert any(i == "RUN" and "scripts/setup.sh" in a and "--target tailcut" in a for i, a in build)
    copied = {source for i, a in build if i == "COPY" and not a.startswith("--")
              for source in a.split()[:-1]}
    for line in (REPO_ROOT / "CMakeLists.txt").read_text().splitlines():
        m = re.match(r"\s*add_subdirectory\((\w+)\)", line)
        if m:
            assert f"{m.group(1)}/" in copied, f"CMakeLists.txt needs {m.group(1)}/: not copied"
    assert {"CMakeLists.txt", "cmake/", "scripts/", "tools/"} <= copied  # Set-up needs these.
    assert runtime[0][1].startswith("debian:bookworm-slim")
    one = {}
    for instruction, arguments in runtime:
        one[instruction] = arguments  # The last of each counts.
    user = one["USER"].split(":")[0]
    assert user not in ("0", "root"), "the server must not run as root"
    assert any(i == "RUN" and f"--uid {user}" in a and "useradd" in a for i, a in runtime)
    _, _, pod, _, _ = _deployment()
    assert str(pod["spec"]["securityContext"]["runAsUser"]) == user  # Kubernetes agrees.
    entrypoint, cmd = _exec_form(one["ENTRYPOINT"]), _exec_form(one["CMD"])
    assert any(i == "COPY" and a.endswith(f" {entrypoint[0]}") for i, a in runtime)
    flags = parse_flags(cmd, serve_help)
    settings = effective(serve_help, {}, flags)
    assert settings["server.host"] == "0.0.0.0"
    exposed = {int(p.split("/")[0]) for p in one["EXPOSE"].split()}
    ports = {int(settings["server.port"]), int(settings["server.grpc_port"])}
    assert exposed == ports == {8080, 8001}
    assert settings["models.repository"] in _exec_form(one["VOLUME"])
    assert one["STOPSIGNAL"] == "SIGTERM"
    assert "/v2/health/ready" in one["HEALTHCHECK"] and "/8080" in one["HEALTHCHECK"]


def _healthcheck_command() -> list[str]:
    runtime = _containerfile_stages()[-1]
    (arguments,) = [a for i, a in runtime if i == "HEALTHCHECK"]
    m = re.search(r"\bCMD\s+(\[.*\])\s*$", arguments)
    assert m, f"HEALTHCHECK ... CMD [exec form]: {arguments}"
    return _exec_form(m.group(1))


def test_healthcheck_command_reads_readiness(server):
    command = _healthcheck_command()
    assert shutil.which(command[0]), f"{command[0]} (in debian:bookworm-slim) is not here"

    def run(port: int) -> int:
        probe = [part.replace("/8080", f"/{port}") for part in command]
        return subprocess.run(probe, capture_output=True, timeout=10).returncode

    assert run(server.port) == 0
    assert run(free_port()) != 0  # Nothing listening: unhealthy.


# --- the docs page -------------------------------------------------------------------------------


def test_docs_page_covers_every_recipe_file():
    text = DOCS.read_text()
    mine = [CONTAINERFILE, DEPLOY / "Containerfile.dockerignore", UNIT, UNIT_CONFIG,
            *sorted(K8S.glob("*.yaml")), *sorted((DEPLOY / "prometheus").glob("*.yml")),
            DEPLOY / "grafana" / "tailcut-dashboard.json"]
    for path in mine:
        rel = path.relative_to(REPO_ROOT).as_posix()
        assert rel in text or path.name in text, f"{DOCS.name} does not mention {rel}"
    for heading in ("Container image", "Kubernetes", "systemd", "Monitoring"):
        assert re.search(rf"^#+ .*{heading}", text, re.M), f"no section on {heading}"
    assert "cannot" in text.lower() and "CI" in text  # Says what is validated and what not.
