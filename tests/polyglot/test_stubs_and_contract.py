"""The committed Go and TypeScript stubs are what buf.gen.yaml makes of protos/, the TypeScript ones compile and
exchange messages with the Python ones, and `buf breaking` holds protos/ to the released contract (and would
notice a break). The Go stubs are compiled and used by test_go_client.py."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2, duration_pb2

from ragsvc.v1 import rag_service_pb2 as pb
from tests.polyglot.gotools import DEBIAN, ROOT, TOOLS
from tests.polyglot.helpers import require_tools

BUF = TOOLS / "node_modules" / ".bin" / "buf"
TS = TOOLS / "ts"
TSC = TS / "node_modules" / ".bin" / "tsc"
RELEASED_CONTRACT = ROOT / "tests" / "polyglot" / "released-contract.binpb"
STUBS = {"go": ".go", "ts": ".ts"}  # every stub of the language: ragsvc/v1, and for TypeScript the google/ it imports


def missing(*paths: Path) -> str | None:
    absent = [str(p.relative_to(ROOT)) for p in paths if not p.exists()]
    return f"not installed: {', '.join(absent)} (run `make go-tools ts-tools`)" if absent else None


def buf(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BUF), *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """buf.gen.yaml's output now, into a directory of .tools/ts (where tsc finds @bufbuild/protobuf)."""
    require_tools(missing(BUF, DEBIAN / ".unpacked", TS / "node_modules" / ".bin" / "protoc-gen-es"))
    out = TS / "fresh"
    shutil.rmtree(out, ignore_errors=True)
    result = buf("generate", "--output", str(out))
    assert result.returncode == 0, result.stderr
    return out


@pytest.mark.parametrize("language", sorted(STUBS))
def test_committed_stubs_are_up_to_date(fresh: Path, language: str) -> None:
    suffix = STUBS[language]
    made_dir, committed_dir = fresh / "generated" / language, ROOT / "generated" / language
    made = {str(p.relative_to(made_dir)): p.read_bytes() for p in made_dir.rglob(f"*{suffix}")}
    committed = {str(p.relative_to(committed_dir)): p.read_bytes() for p in committed_dir.rglob(f"*{suffix}")}
    assert made.keys() == committed.keys(), "run `make generate`: generated files differ from protos/"
    stale = sorted(name for name in made if made[name] != committed[name])
    assert not stale, f"run `make generate`: stale {language} stubs {stale}"


def test_typescript_stubs_compile_and_speak_the_wire_format_of_the_python_ones(fresh: Path) -> None:
    """Strict tsc against the pinned @bufbuild/protobuf runtime, then messages across TypeScript and Python."""
    (fresh / "package.json").write_text('{"type": "module"}\n')
    js = fresh / "js"
    sources = sorted(str(p) for p in (fresh / "generated" / "ts").rglob("*.ts"))
    # generated/ts holds ragsvc/v1 and the googleapis files it imports (google/...): the output mirrors it.
    root = fresh / "generated" / "ts"
    options = ["--strict", "--skipLibCheck", "--target", "es2022", "--module", "nodenext", "--rootDir", str(root)]
    options += ["--outDir", str(js)]
    result = subprocess.run([str(TSC), *options, *sources], cwd=TS, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr

    answer = pb.Answer(
        text="Up to 12000 euros a quarter. [#1]",
        action=pb.ACTION_ROUTE,
        grounded=True,
        citations=[pb.Citation(marker=1, source_id="travel:0", page_number=4), pb.Citation(marker=2, source_id="hr:3")],
        confidence=pb.Confidence(overall=61.5),
        timings=pb.Timings(total=duration_pb2.Duration(seconds=2, nanos=5)),
    )
    encoded = base64.b64encode(answer.SerializeToString()).decode()
    stubs = js / "ragsvc" / "v1"
    shutil.copy(ROOT / "tests" / "polyglot" / "ts" / "roundtrip.mjs", stubs / "roundtrip.mjs")
    roundtrip = ["node", str(stubs / "roundtrip.mjs"), encoded]
    node = subprocess.run(roundtrip, capture_output=True, text=True, timeout=60, check=False)
    assert node.returncode == 0, node.stderr
    request_b64, decoded = node.stdout.splitlines()

    request = pb.AskRequest.FromString(base64.b64decode(request_b64))
    assert request == pb.AskRequest(
        query="Wie hoch ist das Reisebudget? ✓",
        tenant_id="acme",
        user_tags=["finance"],
        retrieval=pb.RetrievalOptions(top_k=3),
        follow_up_count=0,
    )
    assert request.HasField("follow_up_count"), "an optional field set to its default still travels"
    assert json.loads(decoded) == {
        "text": "Up to 12000 euros a quarter. [#1]",
        "action": "ROUTE",
        "grounded": True,
        "citations": [{"marker": 1, "sourceId": "travel:0", "page": 4}, {"marker": 2, "sourceId": "hr:3", "page": None}],
        "overall": 61.5,
        "totalSeconds": 2,
    }


def test_the_released_contract_is_the_whole_contract() -> None:
    """An empty or partial image would let every change pass `buf breaking`."""
    image = descriptor_pb2.FileDescriptorSet.FromString(RELEASED_CONTRACT.read_bytes())  # a buf image is one
    files = {f.name: f for f in image.file}
    released = {"ragsvc/v1/rag_service.proto", "ragsvc/v1/index_service.proto", "ragsvc/v1/admin_service.proto"}
    assert released <= files.keys()  # files added since are new, not released: nothing to break yet
    assert {s.name for name in released for s in files[name].service} == {"RagService", "IndexService", "AdminService"}
    assert sum(len(files[name].message_type) for name in released) > 30


def test_buf_breaking_passes_and_catches_a_deleted_field(tmp_path: Path) -> None:
    require_tools(missing(BUF))
    result = buf("breaking", "--against", str(RELEASED_CONTRACT))
    assert result.returncode == 0, result.stdout + result.stderr

    shutil.copytree(ROOT / "protos", tmp_path / "protos")
    shutil.copy(ROOT / "buf.yaml", tmp_path / "buf.yaml")
    proto = tmp_path / "protos" / "ragsvc" / "v1" / "rag_service.proto"
    text = proto.read_text()
    assert "  string query = 1;\n" in text
    proto.write_text(text.replace("  string query = 1;\n", "", 1))  # AskRequest.query, its first occurrence
    result = buf("breaking", "--against", str(RELEASED_CONTRACT), cwd=tmp_path)
    assert result.returncode != 0
    assert 'Previously present field "1" with name "query" on message "AskRequest" was deleted' in result.stdout, result.stdout
