"""Metadata from the command line as a user gives it: `ragsvc ingest --meta KEY[:TYPE]=VALUE` for every file, a
`NAME.meta.json` sidecar beside a file for that file, and `ragsvc ask --filter` over them, against a real server."""

from __future__ import annotations

import json
from pathlib import Path

from ragsvc.v1 import index_service_pb2 as index_pb
from tests.conftest import shared_embedder
from tests.support.cli import run_cli
from tests.support.servers import connected, running_server


async def test_metadata_from_options_and_sidecars_is_filtered_on(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "act.md").write_text("# Contract Act\n\nA valid contract requires free consent and lawful consideration.")
    (docs / "blog.md").write_text("# Contracts explained\n\nA valid contract requires agreement and something of value.")
    (docs / "act.md.meta.json").write_text(json.dumps(
        {"jurisdiction": "India", "year": 1872, "source_type": "statute", "code:string": "007", "binding": True}
    ))  # fmt: skip
    (docs / "blog.md.meta.json").write_text(json.dumps({"published_at": "2024-03-01"}))

    async with running_server(tmp_path / "data", embedder=shared_embedder(), demo_corpus=False) as server:
        address = ["--address", server.address, "--tenant", "acme"]
        code, out, err = await run_cli("ingest", str(docs), *address, "--meta", "jurisdiction=UK",
                                       "--meta", "reviewed:bool=false")  # fmt: skip
        assert code == 0, (out, err)

        async with connected(server) as stubs:
            listed = await stubs.index.ListDocuments(index_pb.ListDocumentsRequest(tenant_id="acme"))
        metadata = {d.document_id: {k: getattr(v, v.WhichOneof("kind")) for k, v in d.metadata.items()}
                    for d in listed.documents}  # fmt: skip
        act, blog = metadata["act"], metadata["blog"]
        assert (act["jurisdiction"], act["year"], act["code"], act["binding"]) == ("India", 1872, "007", True), \
            "the sidecar wins over --meta, and names types"  # fmt: skip
        assert (act["source_type"], act["reviewed"]) == ("statute", False)
        assert (blog["jurisdiction"], blog["source_type"]) == ("UK", "user_upload")
        assert blog["published_at"].ToDatetime().isoformat() == "2024-03-01T00:00:00"
        assert {d.document_id: d.trust for d in listed.documents} == {"act": 1.0, "blog": 0.5}

        code, out, _ = await run_cli("ask", "What does a valid contract require?", *address, "--json",
                                     "--filter", "jurisdiction = UK AND published_at >= 2024-01-01")  # fmt: skip
        assert code == 0
        assert {c["documentId"] for c in json.loads(out)["citations"]} == {"blog"}

        code, _, err = await run_cli("ask", "What does a valid contract require?", *address, "--filter", "jurisdicton = UK")
        assert code != 0 and "jurisdicton: no document of this tenant declares this metadata key" in err

        code, out, _ = await run_cli("docs", "list", *address)
        assert out.splitlines()[-1].endswith(
            "metadata keys: binding (bool), code (string), jurisdiction (string), published_at (timestamp), "
            "reviewed (bool), source_type (string), year (number)"
        )
        code, out, _ = await run_cli("docs", "show", "act", *address)
        assert json.loads(out)["metadata"]["year"] == {"numberValue": 1872.0}

        (docs / "blog.md.meta.json").write_text("[1, 2]")
        code, out, _ = await run_cli("ingest", str(docs / "blog.md"), *address)
        assert code == 1 and "blog.md.meta.json: must be a JSON object of metadata" in out
        code, _, err = await run_cli("ingest", str(docs / "act.md"), *address, "--meta", "year:integer=3")
        assert code == 2 and "--meta: year: unknown type 'integer'" in err
