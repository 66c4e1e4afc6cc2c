"""TLS and mutual TLS, with a CA, server and client certificates made in the test (cryptography)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ragsvc.config import Settings
from ragsvc.errors import InvalidRequest
from ragsvc.v1 import rag_service_pb2 as pb
from tests.support.servers import connected, running_server


@dataclass(frozen=True)
class Pem:
    cert: bytes
    key: bytes


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    encoding, private_format = serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8
    return key.private_bytes(encoding, private_format, serialization.NoEncryption())


def make_ca(common_name: str) -> tuple[Pem, ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return Pem(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)), key, cert


def make_leaf(common_name: str, ca_key: ec.EllipticCurvePrivateKey, ca_cert: x509.Certificate, *, server: bool) -> Pem:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False,
        )
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
    cert = builder.sign(ca_key, hashes.SHA256())
    return Pem(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


@dataclass(frozen=True)
class Pki:
    ca: Pem
    server: Pem
    client: Pem
    stranger: Pem  # a client certificate from another CA
    files: dict[str, str]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    ca, ca_key, ca_cert = make_ca("ragsvc test CA")
    _, other_key, other_cert = make_ca("some other CA")
    server = make_leaf("ragsvc", ca_key, ca_cert, server=True)
    client = make_leaf("billing-svc", ca_key, ca_cert, server=False)
    stranger = make_leaf("intruder", other_key, other_cert, server=False)
    directory = tmp_path_factory.mktemp("pki")
    files = {}
    for name, data in (("ca.pem", ca.cert), ("server.pem", server.cert), ("server.key", server.key)):
        (directory / name).write_bytes(data)
        files[name] = str(directory / name)
    return Pki(ca, server, client, stranger, files)


async def ask(address: str, credentials: grpc.ChannelCredentials | None) -> pb.Answer:
    async with connected(address, credentials=credentials) as stubs:
        return (await stubs.rag.Ask(pb.AskRequest(query="What happens on SIGTERM?"), timeout=5)).answer


async def test_mutual_tls_admits_only_clients_with_a_certificate_from_the_ca(pki: Pki, tmp_path: Path) -> None:
    async with running_server(
        tmp_path,
        tls_cert_file=pki.files["server.pem"],
        tls_key_file=pki.files["server.key"],
        tls_client_ca_file=pki.files["ca.pem"],
    ) as server:
        address = f"localhost:{server.port}"
        trusted = grpc.ssl_channel_credentials(pki.ca.cert, pki.client.key, pki.client.cert)
        assert (await ask(address, trusted)).grounded

        for credentials in (
            grpc.ssl_channel_credentials(pki.ca.cert),  # no client certificate
            grpc.ssl_channel_credentials(pki.ca.cert, pki.stranger.key, pki.stranger.cert),  # another CA's
            None,  # plaintext
        ):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await ask(address, credentials)
            assert caught.value.code() == grpc.StatusCode.UNAVAILABLE


async def test_tls_without_a_client_ca_needs_no_client_certificate(pki: Pki, tmp_path: Path) -> None:
    async with running_server(
        tmp_path, tls_cert_file=pki.files["server.pem"], tls_key_file=pki.files["server.key"], demo_corpus=False
    ) as server:
        answer = await ask(f"localhost:{server.port}", grpc.ssl_channel_credentials(pki.ca.cert))
        assert not answer.grounded  # no corpus here: an honest refusal, over TLS
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await ask(f"localhost:{server.port}", None)
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE


# A bad TLS setting used to stop RagServer.start; it is now refused when the settings are built (before anything
# opens), naming the variable.
@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"tls_cert_file": "/nonexistent/server.pem", "tls_key_file": "server.key"}, "RAG_TLS_CERT_FILE"),
        ({"tls_cert_file": "server.pem", "tls_key_file": "/nonexistent/server.key"}, "RAG_TLS_KEY_FILE"),
        ({"tls_cert_file": "server.pem", "tls_key_file": "not-pem.txt"}, "RAG_TLS_KEY_FILE"),
        ({"tls_cert_file": "server.pem"}, "RAG_TLS_KEY_FILE"),  # a certificate without its key
        ({"tls_client_ca_file": "ca.pem"}, "RAG_TLS_CERT_FILE"),  # client certificates, but no TLS
        ({"tls_key_file": "server.key"}, "RAG_TLS_CERT_FILE"),
        (
            {"tls_cert_file": "server.pem", "tls_key_file": "server.key", "tls_client_ca_file": "/nonexistent/ca.pem"},
            "RAG_TLS_CLIENT_CA_FILE",
        ),
    ],
)
def test_a_bad_tls_configuration_is_refused_naming_the_variable(pki: Pki, tmp_path: Path, settings: dict, field: str) -> None:
    (tmp_path / "not-pem.txt").write_text("just some text")
    files = {**pki.files, "not-pem.txt": str(tmp_path / "not-pem.txt")}
    with pytest.raises(InvalidRequest) as caught:
        Settings.of(**{name: files.get(value, value) for name, value in settings.items()})
    assert [v.field for v in caught.value.violations] == [field]


async def test_a_bad_tls_configuration_stops_the_start(tmp_path: Path) -> None:
    with pytest.raises(InvalidRequest) as caught:
        async with running_server(tmp_path, tls_client_ca_file="ca.pem"):
            pass
    # Both refusals at once: no certificate, and a CA file that does not exist.
    assert [v.field for v in caught.value.violations] == ["RAG_TLS_CERT_FILE", "RAG_TLS_CLIENT_CA_FILE"]
