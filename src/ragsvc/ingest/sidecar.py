"""A file's metadata sidecar: `NAME.meta.json` beside the file `NAME` (`report.pdf` -> `report.pdf.meta.json`),
read by `ragsvc ingest` for each file it sends.

The sidecar is one JSON object of metadata: `{"jurisdiction": "India", "year": 1872, "binding": true,
"published_at": "1872-09-01", "code:string": "007"}`. Each value is a string, number or boolean; its type is
chosen as for `--meta` (`ragsvc.metadata.read_entry`): a JSON number or boolean keeps its type, a string is read
as a boolean, number, timestamp or string (the first that reads it), and `key:type` names the type.
"""

from __future__ import annotations

import json
from pathlib import Path

from ragsvc.metadata import MetadataValue, read_entry

__all__ = ["SIDECAR_SUFFIX", "read_sidecar", "sidecar_of"]

SIDECAR_SUFFIX = ".meta.json"


def sidecar_of(path: Path) -> Path:
    """Where the sidecar of the file at `path` is."""
    return path.with_name(path.name + SIDECAR_SUFFIX)


def read_sidecar(path: Path) -> dict[str, MetadataValue]:
    """The metadata of the file at `path` from its sidecar (empty when it has none). ValueError saying what is
    wrong with the sidecar; OSError when it cannot be read."""
    sidecar = sidecar_of(path)
    if not sidecar.is_file():
        return {}
    try:
        document = json.loads(sidecar.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ValueError(f"{sidecar.name}: not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise ValueError(f"{sidecar.name}: must be a JSON object of metadata")
    metadata: dict[str, MetadataValue] = {}
    for spec, raw in document.items():
        if not isinstance(raw, str | int | float):  # bool is an int
            raise ValueError(f"{sidecar.name}: {spec}: a value must be a string, number or boolean")
        try:
            key, value = read_entry(spec, raw)
        except ValueError as exc:
            raise ValueError(f"{sidecar.name}: {exc}") from None
        metadata[key] = value
    return metadata
