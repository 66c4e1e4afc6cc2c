"""deploy/: the container build file and the Kubernetes manifests a platform team applies (issue 14, item 5).

No Docker engine or cluster runs here, so the checks are: every manifest against the Kubernetes API schemas
(kubernetes-validate, strict, offline), the Dockerfile through hadolint, the facts the files must agree on
(ports, probe names, grace period, label selectors, setting names), and a real `ragsvc serve` started with the
manifests' own settings, probed by the names the probes use."""

from __future__ import annotations

import copy
import json
import os
import re
import select
import shlex
import signal
import socket
import subprocess
import sys
import time
import tomllib
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import grpc
import kubernetes_validate
import pytest
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ragsvc.config.settings import variables

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
DOCKERFILE = DEPLOY / "Dockerfile"
DOCKERIGNORE = DEPLOY / "Dockerfile.dockerignore"
REPLICAS_PAGE = ROOT / "docs" / "replicas.md"

GRPC_PORT = 50051
# The oldest Kubernetes the manifests claim (gRPC probes are GA since 1.27) and the newest schemas bundled.
KUBERNETES_VERSIONS = ("1.27", "1.37")
# The shared backends' URLs: the manifests name servers (postgres, redis, qdrant) that a test process cannot reach,
# so the live test leaves them out and ragsvc runs on its embedded defaults (the same names are served either way,
# but `redis`; replicas on real shared backends are tested in tests/server/test_replicas.py).
SHARED_BACKEND_URLS = ("RAG_DATABASE_URL", "RAG_REDIS_URL", "RAG_QDRANT_URL")
# Health names that follow every dependency: what readiness checks, and what liveness must not.
AGGREGATE_HEALTH_NAMES = ("", "ragsvc.v1.RagService", "ragsvc.v1.IndexService", "ragsvc.v1.AdminService")


# ---- reading the files ---------------------------------------------------------------------------------------


def deploy_doc() -> str:
    """The page on running several replicas and deploying them (docs/replicas.md)."""
    return REPLICAS_PAGE.read_text()


def manifest_files() -> list[Path]:
    return sorted(p for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml")


def load_documents() -> list[dict[str, Any]]:
    documents = []
    for path in manifest_files():
        documents += [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]
    return documents


DOCUMENTS = load_documents()


def the(kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in DOCUMENTS if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def config_map() -> dict[str, str]:
    return the("ConfigMap")["data"]


def secret() -> dict[str, str]:
    return the("Secret").get("stringData", {})


def pod_spec() -> dict[str, Any]:
    return the("Deployment")["spec"]["template"]["spec"]


def container() -> dict[str, Any]:
    (only,) = pod_spec()["containers"]
    return only


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order: comments dropped, backslash continuations joined."""
    instructions, pending = [], ""
    for line in DOCKERFILE.read_text().splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        full = pending + stripped
        pending = ""
        keyword, _, arguments = full.partition(" ")
        instructions.append((keyword.upper(), arguments.strip()))
    assert not pending, "the Dockerfile ends inside a continuation"
    return instructions


def dockerfile(keyword: str) -> list[str]:
    return [arguments for k, arguments in dockerfile_instructions() if k == keyword]


def dockerfile_env() -> dict[str, str]:
    env = {}
    for arguments in dockerfile("ENV"):
        for pair in shlex.split(arguments):
            name, _, value = pair.partition("=")
            env[name] = value
    return env


def known_setting_names() -> set[str]:
    """The environment names ragsvc reads: every setting's variable (src/ragsvc/config/settings.py)."""
    return {str(info.validation_alias) for _, _, _, info in variables()}


def grace_period_s() -> float:
    assert "RAG_GRACE_PERIOD_SECONDS" in config_map(), "set the drain time explicitly next to its grace period"
    return float(config_map()["RAG_GRACE_PERIOD_SECONDS"])


def pre_stop_sleep_s() -> float:
    pre_stop = container()["lifecycle"]["preStop"]
    if "sleep" in pre_stop:  # the native sleep action (Kubernetes 1.30+)
        return float(pre_stop["sleep"]["seconds"])
    command = pre_stop["exec"]["command"]
    assert command[0] == "sleep" and len(command) == 2, command
    return float(command[1])


def health_name(probe: str) -> str:
    return container()[probe]["grpc"].get("service", "")


# ---- the manifests against the Kubernetes schemas --------------------------------------------------------------


def test_kustomization_lists_every_manifest() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == sorted(p.name for p in manifest_files())
    images = {image["name"] for image in kustomization.get("images", [])}
    assert container()["image"].split(":")[0] in images


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("document", DOCUMENTS, ids=[f"{d['kind']}/{d['metadata']['name']}" for d in DOCUMENTS])
def test_manifest_is_valid_kubernetes(document: dict[str, Any], version: str) -> None:
    # strict: a field the API does not know (a typo) fails, as the API server's strict field validation would.
    kubernetes_validate.validate(document, version, strict=True)


def test_the_validator_rejects_a_broken_manifest() -> None:
    """The control: a misspelt probe field and a port given as a string both fail."""
    deployment = copy.deepcopy(the("Deployment"))
    probe = deployment["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]
    probe["failureTreshold"] = probe.pop("failureThreshold")
    with pytest.raises(kubernetes_validate.ValidationError, match="failureTreshold"):
        kubernetes_validate.validate(deployment, "1.37", strict=True)
    deployment = copy.deepcopy(the("Deployment"))
    deployment["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["grpc"]["port"] = "50051"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, "1.37", strict=True)


# ---- what the files must agree on --------------------------------------------------------------------------------


def test_probes_are_native_grpc_on_the_health_service() -> None:
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        spec = container()[probe]
        handlers = {"exec", "httpGet", "tcpSocket", "grpc"} & spec.keys()
        assert handlers == {"grpc"}, f"{probe} must be a gRPC probe"
        assert spec["grpc"]["port"] == GRPC_PORT
    # Readiness: this replica can answer. Liveness and start-up: not a name that follows every dependency,
    # or an outage of the LLM or Qdrant would restart every replica.
    assert health_name("readinessProbe") == ""
    for probe in ("livenessProbe", "startupProbe"):
        assert health_name(probe) not in AGGREGATE_HEALTH_NAMES, probe
    readiness, liveness = container()["readinessProbe"], container()["livenessProbe"]
    assert readiness["periodSeconds"] * readiness["failureThreshold"] <= 15, "readiness should react in seconds"
    assert liveness["periodSeconds"] * liveness["failureThreshold"] >= 120, "liveness should tolerate blips"


def test_termination_grace_covers_the_pre_stop_sleep_and_the_drain() -> None:
    spec = pod_spec()
    env_overrides = {e["name"] for e in container().get("env", [])}
    assert "RAG_GRACE_PERIOD_SECONDS" not in env_overrides, "one place for the drain time: the ConfigMap"
    assert pre_stop_sleep_s() >= 3, "endpoint removal needs a few seconds to reach proxies and DNS"
    # The kubelet's clock starts with preStop; SIGTERM follows it; SIGKILL comes at terminationGracePeriodSeconds.
    margin = spec["terminationGracePeriodSeconds"] - pre_stop_sleep_s() - grace_period_s()
    assert margin >= 5, f"only {margin} s left to close the components after the drain"


def test_ports_and_metrics_agree_everywhere() -> None:
    ports = {p["name"]: p["containerPort"] for p in container()["ports"]}
    metrics_port = int(config_map()["RAG_METRICS_PORT"])
    assert ports == {"grpc": GRPC_PORT, "metrics": metrics_port}
    assert config_map()["RAG_GRPC_ADDRESS"] == f"0.0.0.0:{GRPC_PORT}"
    annotations = the("Deployment")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert int(annotations["prometheus.io/port"]) == metrics_port
    assert annotations["prometheus.io/path"] == "/metrics"
    exposed = {int(p.split("/")[0]) for arguments in dockerfile("EXPOSE") for p in arguments.split()}
    assert exposed == {GRPC_PORT, metrics_port}
    assert dockerfile_env()["RAG_GRPC_ADDRESS"] == f"0.0.0.0:{GRPC_PORT}"
    assert int(dockerfile_env()["RAG_METRICS_PORT"]) == metrics_port


def test_services_and_the_budget_select_the_replicas() -> None:
    deployment = the("Deployment")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector.items() <= pod_labels.items()
    assert deployment["spec"]["replicas"] >= 2
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0

    port_names = {p["name"] for p in container()["ports"]}
    own = [s for s in DOCUMENTS if s["kind"] == "Service" and s["spec"].get("type") != "ExternalName"]
    assert {s["metadata"]["name"] for s in own} == {"ragsvc", "ragsvc-headless"}
    for service in own:
        assert service["spec"]["selector"].items() <= pod_labels.items(), service["metadata"]["name"]
        grpc_ports = [p for p in service["spec"]["ports"] if p["port"] == GRPC_PORT]
        assert grpc_ports and grpc_ports[0]["targetPort"] == "grpc"
        assert {p["targetPort"] for p in service["spec"]["ports"]} <= port_names
    assert the("Service", "ragsvc")["spec"]["type"] == "ClusterIP"
    headless = the("Service", "ragsvc-headless")["spec"]
    assert headless["clusterIP"] == "None" and not headless.get("publishNotReadyAddresses", False)

    budget = the("PodDisruptionBudget")["spec"]
    assert budget["selector"]["matchLabels"].items() <= pod_labels.items()
    assert 1 <= budget["maxUnavailable"] < deployment["spec"]["replicas"]


def test_shared_backends_are_named_services() -> None:
    external = {s["metadata"]["name"]: s for s in DOCUMENTS if s["kind"] == "Service"
                and s["spec"].get("type") == "ExternalName"}  # fmt: skip
    settings = {**config_map(), **secret()}
    for name, scheme, port in (
        ("RAG_DATABASE_URL", "postgresql", 5432),
        ("RAG_REDIS_URL", "redis", 6379),
        ("RAG_QDRANT_URL", "http", 6333),
    ):
        url = urlsplit(settings[name])
        assert url.scheme == scheme, name
        assert url.hostname in external, f"{name} names {url.hostname}, which no Service in deploy/k8s provides"
        assert port in {p["port"] for p in external[url.hostname]["spec"]["ports"]}, name
    # Credentials stay out of the ConfigMap.
    for name in ("RAG_DATABASE_URL", "RAG_REDIS_URL", "RAG_API_KEYS", "OPENAI_API_KEY", "RAG_QDRANT_API_KEY"):
        assert name in secret() and name not in config_map(), name
    json.loads(secret()["RAG_API_KEYS"])


def test_every_setting_named_exists_in_config() -> None:
    """Each name in the ConfigMap, the Secret and the pod's env, and each RAG_* name written anywhere in deploy/
    or in docs/replicas.md, is one that src/ragsvc/config reads."""
    known = known_setting_names()
    used = set(config_map()) | set(secret()) | {e["name"] for e in container().get("env", [])}
    for text in [*(path.read_text() for path in DEPLOY.rglob("*") if path.is_file()), deploy_doc()]:
        used |= set(re.findall(r"\bRAG_[A-Z0-9_]*[A-Z0-9]\b", text))
    unknown = sorted(used - known)
    assert not unknown, f"not settings of ragsvc (src/ragsvc/config): {unknown}"


def test_the_deploy_doc_tells_the_shipped_choices() -> None:
    """docs/replicas.md explains the probe names and the grace arithmetic: it must name what the manifests ship."""
    doc = deploy_doc()
    assert '**Readiness: `""`**' in doc and health_name("readinessProbe") == ""
    assert f"**Liveness: `{health_name('livenessProbe')}`**" in doc
    assert f"**Start-up: `{health_name('startupProbe')}`**" in doc
    termination = pod_spec()["terminationGracePeriodSeconds"]
    pre_stop, grace = int(pre_stop_sleep_s()), int(grace_period_s())
    margin = termination - pre_stop - grace
    assert f"{pre_stop} s + {grace} s + {margin} s of margin for closing = {termination} s" in doc
    assert f"preStop (sleep {pre_stop})" in doc


# ---- the container build file -------------------------------------------------------------------------------------


def test_dockerfile_passes_hadolint() -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    result = subprocess.run([str(hadolint), "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_builds_the_service_as_specified() -> None:
    (base,) = dockerfile("FROM")
    assert base.split()[0].split("@")[0] == "python:3.11-slim"
    assert any(re.search(r"\bpip install\b.*\s\.$", run) for run in dockerfile("RUN")), "pip install . from the repo"
    copied = {source.rstrip("/") for arguments in dockerfile("COPY") for source in arguments.split()[:-1]}
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    needed = {"pyproject.toml", pyproject["project"]["readme"]}
    needed |= {directory.split("/")[0] for directory in pyproject["tool"]["setuptools"]["package-dir"].values()}
    assert needed <= copied, f"pip install . needs {sorted(needed - copied)} in the image"

    (user,) = dockerfile("USER")
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) != 0, "a numeric non-root user, so runAsNonRoot can verify it"
    assert pod_spec()["securityContext"]["runAsUser"] == int(uid)

    data_dir = dockerfile_env()["RAG_DATA_DIR"]
    (volume,) = dockerfile("VOLUME")
    assert json.loads(volume) == [data_dir]
    assert config_map()["RAG_DATA_DIR"] == data_dir
    mounts = {m["mountPath"] for m in container()["volumeMounts"]}
    assert data_dir in mounts and "/tmp" in mounts, "a read-only root file system needs both writable"
    assert container()["securityContext"]["readOnlyRootFilesystem"] is True

    (stop_signal,) = dockerfile("STOPSIGNAL")
    assert stop_signal == "SIGTERM"
    (entrypoint,) = dockerfile("ENTRYPOINT")
    (cmd,) = dockerfile("CMD")
    # Exec form (JSON): ragsvc is PID 1 and gets SIGTERM itself, no shell in between.
    assert json.loads(entrypoint) + json.loads(cmd) == ["ragsvc", "serve"]
    assert json.loads(entrypoint) + container().get("args", []) == ["ragsvc", "serve"]


def ignored(path: str, patterns: list[str]) -> bool:
    """Docker's .dockerignore rule: the last pattern matching the path or one of its parents decides."""
    parts = path.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    verdict = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        glob = pattern.removeprefix("!").strip("/")
        regex = re.escape(glob).replace(r"\*\*/", "(.*/)?").replace(r"\*", "[^/]*").replace(r"\?", "[^/]")
        if any(re.fullmatch(regex, candidate) for candidate in candidates):
            verdict = not negated
    return verdict


def test_dockerignore_keeps_exactly_what_pip_install_reads() -> None:
    patterns = [line.strip() for line in DOCKERIGNORE.read_text().splitlines()
                if line.strip() and not line.startswith("#")]  # fmt: skip
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    sent = {path for path in tracked if not ignored(path, patterns)}
    needed = {p for p in tracked if p in ("pyproject.toml", "README.md") or p.startswith(("src/", "generated/"))}
    assert needed <= sent, sorted(needed - sent)[:10]
    assert not sent - needed, f"sent to the builder for nothing: {sorted(sent - needed)[:10]}"
    assert ignored("src/ragsvc/__pycache__/app.cpython-311.pyc", patterns)


# ---- the manifests' settings on a real server ---------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check(stub: health_pb2_grpc.HealthStub, service: str) -> int:
    return stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=2).status


def test_the_manifest_settings_serve_every_probed_name(tmp_path: Path) -> None:
    """`ragsvc serve` with the ConfigMap and Secret as its environment (shared backends left out: no such servers
    here, so the embedded defaults stand in): the settings parse, every name a probe asks for answers SERVING,
    /metrics answers, and SIGTERM ends the process well within the grace period."""
    metrics_port = free_port()
    settings = {**config_map(), **secret()}
    for name in SHARED_BACKEND_URLS:
        settings.pop(name)
    settings |= {"RAG_GRPC_ADDRESS": "127.0.0.1:0", "RAG_METRICS_PORT": str(metrics_port)}
    settings["RAG_DATA_DIR"] = str(tmp_path)
    base = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR", "TIKTOKEN_CACHE_DIR")}
    ragsvc = Path(sys.executable).parent / "ragsvc"
    log = tmp_path / "serve.log"
    started = time.monotonic()
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [str(ragsvc), "serve"], env={**base, **settings}, stdout=subprocess.PIPE, stderr=stderr, text=True
        )
    try:
        ready, _, _ = select.select([process.stdout], [], [], 120)
        assert ready, "no start-up line in 120 s: " + log.read_text()
        line = process.stdout.readline()  # type: ignore[union-attr]
        assert line.startswith("ragsvc serving on "), line + log.read_text()
        address = line.removeprefix("ragsvc serving on ").strip()
        with grpc.insecure_channel(address) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            deadline = time.monotonic() + 30
            while check(stub, health_name("readinessProbe")) != health_pb2.HealthCheckResponse.SERVING:
                assert time.monotonic() < deadline, "never became ready"
                time.sleep(0.1)
            startup = container()["startupProbe"]
            assert time.monotonic() - started < startup["periodSeconds"] * startup["failureThreshold"]
            for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                assert check(stub, health_name(probe)) == health_pb2.HealthCheckResponse.SERVING, probe
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as response:
            assert response.status == 200 and b"rag_" in response.read()

        stopping = time.monotonic()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=grace_period_s() + 5) == 0
        assert time.monotonic() - stopping < grace_period_s()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdout.close()  # type: ignore[union-attr]
