"""A throw-away PKI for one local cluster: CA, serving and client certificates, SA signing key, and
the kubeconfigs that carry a client certificate (:func:`write_kubeconfig`).

ECDSA P-256 keys: generated in milliseconds, so a fresh ``cluster up`` spends its time starting
components, not in key generation.  Everything is written with mode 0600 into the cluster dir.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = dt.timedelta(days=365)


@dataclass(frozen=True)
class CertPair:
    """A certificate and its key on disk."""

    cert: Path
    key: Path


@dataclass(frozen=True)
class ClusterPKI:
    """All the files the components need."""

    ca: CertPair
    apiserver: CertPair
    etcd_server: CertPair
    apiserver_etcd_client: CertPair
    admin: CertPair
    controller_manager: CertPair
    scheduler: CertPair
    apiserver_kubelet_client: CertPair
    service_account_key: Path
    service_account_pub: Path


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    path.chmod(0o600)


def _write_cert(cert: x509.Certificate, path: Path) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    path.chmod(0o600)


def _name(cn: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def _builder(subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey,
             ca: bool) -> x509.CertificateBuilder:
    """Common fields of every certificate: validity, basic constraints, key usage."""
    now = dt.datetime.now(dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=False, content_commitment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=ca,
                                     crl_sign=ca, encipher_only=False, decipher_only=False), critical=True)
    )


def _issue(ca_key: ec.EllipticCurvePrivateKey, ca_cert: x509.Certificate, subject: x509.Name,
           out: Path, stem: str, *, server: bool, client: bool,
           dns: tuple[str, ...] = (), ips: tuple[str, ...] = ()) -> CertPair:
    key = ec.generate_private_key(ec.SECP256R1())
    usages = []
    if server:
        usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
    if client:
        usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
    builder = _builder(subject, ca_cert.subject, key, ca=False).add_extension(
        x509.ExtendedKeyUsage(usages), critical=False)
    if dns or ips:
        sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
        sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    pair = CertPair(out / f"{stem}.crt", out / f"{stem}.key")
    _write_key(key, pair.key)
    _write_cert(cert, pair.cert)
    return pair


def create_pki(out: Path, service_ip: str = "10.0.0.1") -> ClusterPKI:
    """Generate a CA and every certificate a local cluster needs into ``out``."""
    out.mkdir(parents=True, exist_ok=True, mode=0o700)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = _builder(_name("hollowscale-ca"), _name("hollowscale-ca"), ca_key, ca=True).sign(
        ca_key, hashes.SHA256())
    ca = CertPair(out / "ca.crt", out / "ca.key")
    _write_key(ca_key, ca.key)
    _write_cert(ca_cert, ca.cert)
    local_dns = ("localhost",)
    local_ips = ("127.0.0.1",)
    apiserver = _issue(ca_key, ca_cert, _name("kube-apiserver"), out, "apiserver", server=True, client=False,
                       dns=(*local_dns, "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                            "kubernetes.default.svc.cluster.local"),
                       ips=(*local_ips, service_ip))
    etcd_server = _issue(ca_key, ca_cert, _name("etcd"), out, "etcd-server", server=True, client=True,
                         dns=local_dns, ips=local_ips)
    sa_key = ec.generate_private_key(ec.SECP256R1())
    sa_key_path, sa_pub_path = out / "sa.key", out / "sa.pub"
    _write_key(sa_key, sa_key_path)
    sa_pub_path.write_bytes(sa_key.public_key().public_bytes(serialization.Encoding.PEM,
                                                             serialization.PublicFormat.SubjectPublicKeyInfo))
    return ClusterPKI(
        ca=ca,
        apiserver=apiserver,
        etcd_server=etcd_server,
        apiserver_etcd_client=_issue(ca_key, ca_cert, _name("kube-apiserver-etcd-client"), out,
                                     "apiserver-etcd-client", server=False, client=True),
        admin=_issue(ca_key, ca_cert, _name("kubernetes-admin", "system:masters"), out, "admin",
                     server=False, client=True),
        controller_manager=_issue(ca_key, ca_cert, _name("system:kube-controller-manager"), out,
                                  "controller-manager", server=False, client=True),
        scheduler=_issue(ca_key, ca_cert, _name("system:kube-scheduler"), out, "scheduler",
                         server=False, client=True),
        # the apiserver's client to kubelets (logs, exec, port-forward): system:masters, so a kubelet's
        # webhook authorizer allows it as the apiserver's kubelet client is allowed in kubeadm clusters
        apiserver_kubelet_client=_issue(ca_key, ca_cert, _name("kube-apiserver-kubelet-client", "system:masters"),
                                        out, "apiserver-kubelet-client", server=False, client=True),
        service_account_key=sa_key_path,
        service_account_pub=sa_pub_path,
    )


def issue_cert(pki_dir: Path, stem: str, cn: str, org: str | None = None, *, server: bool = False,
               client: bool = False, dns: tuple[str, ...] = (), ips: tuple[str, ...] = ()) -> CertPair:
    """Issue one more certificate from the CA that :func:`create_pki` wrote into ``pki_dir``.

    Written as ``pki_dir/<stem>.crt`` and ``.key`` (mode 0600): e.g. Kueue's webhook and metrics serving
    certificates (``server``, SANs ``localhost`` and ``127.0.0.1``) and its client certificate.
    """
    ca_cert = x509.load_pem_x509_certificate((pki_dir / "ca.crt").read_bytes())
    ca_key = serialization.load_pem_private_key((pki_dir / "ca.key").read_bytes(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{pki_dir / 'ca.key'} is not an ECDSA key")
    return _issue(ca_key, ca_cert, _name(cn, org), pki_dir, stem, server=server, client=client, dns=dns, ips=ips)


def write_kubeconfig(path: Path, server: str, ca: Path, cert: Path, key: Path, user: str,
                     embed: bool = False) -> None:
    """Write a one-context kubeconfig (file paths, or embedded data when ``embed``)."""

    def ref(name: str, file: Path) -> dict[str, str]:
        if embed:
            return {f"{name}-data": base64.b64encode(file.read_bytes()).decode()}
        return {name: str(file)}

    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "hollowscale", "cluster": {"server": server, **ref("certificate-authority", ca)}}],
        "users": [{"name": user, "user": {**ref("client-certificate", cert), **ref("client-key", key)}}],
        "contexts": [{"name": "hollowscale", "context": {"cluster": "hollowscale", "user": user}}],
        "current-context": "hollowscale",
    }
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    os.chmod(path, 0o600)
