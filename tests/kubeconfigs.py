"""Kubeconfigs for the tests of kubecore.config's key handling (importable because pytest puts tests/ on
sys.path): a real certificate and key, and a kubeconfig that embeds them as an admin kubeconfig does."""

from __future__ import annotations

import base64
import datetime
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def cert_and_key() -> tuple[bytes, bytes]:
    """A real self-signed certificate and its EC private key (PEM): what an admin kubeconfig embeds."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubernetes-admin")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def embedded_kubeconfig(folder: Path, cert: bytes, key: bytes) -> Path:
    """``folder/kubeconfig``: ``cert`` as the cluster's CA and the user's certificate, ``key`` its key, all
    embedded (``*-data``); a second user's key that the active context does not use."""

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "a",
           "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443",
                                                  "certificate-authority-data": b64(cert)}}],
           "users": [{"name": "u", "user": {"client-certificate-data": b64(cert), "client-key-data": b64(key)}},
                     {"name": "other", "user": {"client-key-data": b64(b"not the active user's")}}],
           "contexts": [{"name": "a", "context": {"cluster": "c", "user": "u"}}]}
    path = folder / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path
