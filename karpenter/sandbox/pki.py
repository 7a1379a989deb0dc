"""A throwaway certificate authority for the local control plane, and kubeconfigs that use it.

The apiserver serves with a certificate naming loopback and the in-cluster service names; every
client (admin, the scheduler, the controller-manager, kwok) gets a client certificate whose
organisation maps to its groups.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["KeyPair", "Pki", "kubeconfig"]


@dataclass(frozen=True)
class KeyPair:
    cert: Path
    key: Path


def _new_key() -> rsa.RSAPrivateKey:
    # 2048-bit RSA: accepted everywhere and generated in milliseconds.
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _write_key(key: rsa.RSAPrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


class Pki:
    """A throwaway certificate authority and the leaf certificates the components need."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        # Certificate validity is about the real wall clock that the apiserver checks against,
        # not the controllers' injectable clock.
        self._now = datetime.datetime.now(datetime.UTC)  # noqa: TID251
        self._ca_key = _new_key()
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "karpenter-test-ca")])
        self._ca_cert = (
            self._builder(name, self._ca_key)
            .issuer_name(name)
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
            .sign(self._ca_key, hashes.SHA256())
        )
        self.ca = KeyPair(directory / "ca.crt", directory / "ca.key")
        self.ca.cert.write_bytes(self._ca_cert.public_bytes(serialization.Encoding.PEM))
        _write_key(self._ca_key, self.ca.key)

    def _builder(self, subject: x509.Name, key: rsa.RSAPrivateKey) -> x509.CertificateBuilder:
        return (
            x509.CertificateBuilder()
            .subject_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            # Backdated so that small clock differences never make a fresh cert "not yet valid".
            .not_valid_before(self._now - datetime.timedelta(hours=1))
            .not_valid_after(self._now + datetime.timedelta(days=7))
        )

    def issue(
        self,
        name: str,
        common_name: str,
        *,
        organization: str | None = None,
        server_names: tuple[str, ...] = (),
        server_ips: tuple[str, ...] = (),
    ) -> KeyPair:
        attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        if organization:
            # The apiserver maps O= to the user's groups (e.g. system:masters).
            attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
        key = _new_key()
        server = bool(server_names or server_ips)
        usage = [ExtendedKeyUsageOID.SERVER_AUTH] if server else [ExtendedKeyUsageOID.CLIENT_AUTH]
        builder = (
            self._builder(x509.Name(attrs), key)
            .issuer_name(self._ca_cert.subject)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usage), critical=False)
        )
        if server:
            sans: list[x509.GeneralName] = [x509.DNSName(n) for n in server_names]
            sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in server_ips]
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self._ca_key, hashes.SHA256())
        pair = KeyPair(self.directory / f"{name}.crt", self.directory / f"{name}.key")
        pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(key, pair.key)
        return pair

    def service_account_keys(self, private: Path, public: Path) -> None:
        """The key pair the apiserver signs and verifies service-account tokens with."""
        key = _new_key()
        _write_key(key, private)
        public.write_bytes(
            key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )


def kubeconfig(server: str, ca: Path, client: KeyPair, user: str) -> str:
    # Hand-written YAML (all values are plain paths/URLs) keeps this module free of a YAML dep.
    return (
        "apiVersion: v1\n"
        "kind: Config\n"
        "clusters:\n"
        "- name: local\n"
        "  cluster:\n"
        f"    server: {server}\n"
        f"    certificate-authority: {ca}\n"
        "users:\n"
        f"- name: {user}\n"
        "  user:\n"
        f"    client-certificate: {client.cert}\n"
        f"    client-key: {client.key}\n"
        "contexts:\n"
        "- name: local\n"
        "  context:\n"
        "    cluster: local\n"
        f"    user: {user}\n"
        "current-context: local\n"
    )
