"""The committed generated/ code must be exactly what `make generate` produces from protos/."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GENERATED = ROOT / "generated" / "ragsvc" / "v1"


def test_generated_code_is_up_to_date(tmp_path: Path) -> None:
    protos = sorted(str(p.relative_to(ROOT / "protos")) for p in (ROOT / "protos" / "ragsvc").rglob("*.proto"))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            "-Iprotos",
            f"--python_out={tmp_path}",
            f"--pyi_out={tmp_path}",
            f"--grpc_python_out={tmp_path}",
            *protos,
        ],
        cwd=ROOT,
        check=True,
    )
    fresh = {p.name: p.read_bytes() for p in (tmp_path / "ragsvc" / "v1").iterdir()}
    committed = {p.name: p.read_bytes() for p in GENERATED.iterdir() if p.name.endswith((".py", ".pyi")) and "_pb2" in p.name}
    assert fresh.keys() == committed.keys(), "run `make generate`: generated files differ from protos/"
    stale = sorted(name for name in fresh if fresh[name] != committed[name])
    assert not stale, f"run `make generate`: stale generated files {stale}"


def test_stream_request_mirrors_ask_request() -> None:
    from ragsvc.v1 import rag_service_pb2 as pb

    def shape(descriptor):
        return [
            (f.name, f.number, f.type, f.is_repeated, f.has_presence, f.message_type and f.message_type.full_name)
            for f in descriptor.fields
        ]

    assert shape(pb.AskRequest.DESCRIPTOR) == shape(pb.AskStreamRequest.DESCRIPTOR)
