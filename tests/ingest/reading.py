"""A document read as ingestion reads it, with the default limits, for the loader tests."""

from __future__ import annotations

from ragsvc.domain import SourceDocument
from ragsvc.ingest.limits import Deadline, DocumentLimits
from ragsvc.ingest.loaders import load_document
from ragsvc.ingest.sections import Loaded, Section

CHUNK_TOKENS = 180  # RAG_CHUNK_TOKENS' default: what bounds a group of CSV rows


def loaded(document: SourceDocument, limits: DocumentLimits = DocumentLimits()) -> Loaded:
    """The document read within `limits`, as the indexer reads it."""
    return load_document(document, limits, chunk_tokens=CHUNK_TOKENS, deadline=Deadline(limits.parse_seconds))


def sections_of(document: SourceDocument) -> list[Section]:
    """The document's sections, read within the default limits."""
    return loaded(document).sections
