"""TLS and mutual TLS for the gRPC port, from PEM files named by the settings.

RAG_TLS_CERT_FILE + RAG_TLS_KEY_FILE: the server speaks TLS only. Adding RAG_TLS_CLIENT_CA_FILE turns on
mutual TLS: a client must present a certificate signed by that CA, or the handshake fails.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import grpc

from ragsvc.errors import FieldViolation, InvalidRequest

if TYPE_CHECKING:
    from ragsvc.config import Settings


def server_credentials(settings: Settings) -> grpc.ServerCredentials | None:
    """The server's TLS credentials, or None for plaintext; InvalidRequest when the files are inconsistent."""
    cert, key, client_ca = settings.tls_cert_file, settings.tls_key_file, settings.tls_client_ca_file
    if not (cert or key or client_ca):
        return None
    violations = []
    if not cert:
        violations.append(FieldViolation("RAG_TLS_CERT_FILE", "required when TLS is configured"))
    if not key:
        violations.append(FieldViolation("RAG_TLS_KEY_FILE", "required when TLS is configured"))
    if violations:
        raise InvalidRequest(violations, "invalid TLS configuration")
    return grpc.ssl_server_credentials(
        [(_read(key, "RAG_TLS_KEY_FILE"), _read(cert, "RAG_TLS_CERT_FILE"))],
        root_certificates=_read(client_ca, "RAG_TLS_CLIENT_CA_FILE") if client_ca else None,
        require_client_auth=bool(client_ca),
    )


def _read(path: str, setting: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise InvalidRequest([FieldViolation(setting, str(exc))], f"cannot read {setting}: {exc}") from exc
