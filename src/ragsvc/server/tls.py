"""TLS and mutual TLS for the gRPC port, from the PEM files the settings name (checked when they were read).

RAG_TLS_CERT_FILE + RAG_TLS_KEY_FILE: the server speaks TLS only. Adding RAG_TLS_CLIENT_CA_FILE turns on
mutual TLS: a client must present a certificate signed by that CA, or the handshake fails.
"""

from __future__ import annotations

from pathlib import Path

import grpc

from ragsvc.config import HardeningSettings


def server_credentials(settings: HardeningSettings) -> grpc.ServerCredentials | None:
    """The server's TLS credentials, or None for plaintext."""
    if not settings.tls:
        return None
    client_ca = settings.tls_client_ca_file
    return grpc.ssl_server_credentials(
        [(Path(settings.tls_key_file).read_bytes(), Path(settings.tls_cert_file).read_bytes())],
        root_certificates=Path(client_ca).read_bytes() if client_ca else None,
        require_client_auth=bool(client_ca),
    )
