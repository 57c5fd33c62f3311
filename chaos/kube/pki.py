"""The local cluster's keys and credentials, made with openssl for one run and thrown away with it.

A CA, the API server's serving certificate (SANs for loopback, the service IP and the host's name), a
service-account key pair, a static bearer token for one admin user (system:masters), and a kubeconfig that
every component and the harness use. Elliptic-curve keys: about 5 ms each, against 100 ms for RSA 2048.
"""

from __future__ import annotations

import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml


@dataclass(frozen=True)
class Pki:
    dir: Path
    ca: Path
    server_cert: Path
    server_key: Path
    sa_key: Path
    sa_pub: Path
    tokens: Path
    token: str

    def kubeconfig(self, server: str, path: Path, namespace: str = "default") -> Path:
        """A kubeconfig for ``server`` with the admin token (the official client and kubectl both read it)."""
        doc = {
            "apiVersion": "v1", "kind": "Config", "current-context": "chaos",
            "clusters": [{"name": "chaos", "cluster": {"server": server, "certificate-authority": str(self.ca)}}],
            "users": [{"name": "admin", "user": {"token": self.token}}],
            "contexts": [{"name": "chaos", "context": {"cluster": "chaos", "user": "admin", "namespace": namespace}}],
        }
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        path.chmod(0o600)
        return path


def _openssl(*args: str) -> None:
    res = subprocess.run(["openssl", *args], capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args[:2])} failed: {res.stderr.strip()[-300:]}")


def make_pki(directory: Path, hostname: str) -> Pki:
    d = directory
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    for key in ("ca.key", "apiserver.key", "sa.key"):
        _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(d / key))
    _openssl("req", "-x509", "-new", "-key", str(d / "ca.key"), "-subj", "/CN=chaos-kube-ca", "-days", "7",
             "-out", str(d / "ca.crt"))
    _openssl("req", "-new", "-key", str(d / "apiserver.key"), "-subj", "/CN=kube-apiserver",
             "-out", str(d / "apiserver.csr"))
    sans = ["IP:127.0.0.1", "IP:10.96.0.1", "DNS:localhost", f"DNS:{hostname}", "DNS:kubernetes",
            "DNS:kubernetes.default", "DNS:kubernetes.default.svc"]
    (d / "apiserver.ext").write_text(f"subjectAltName={','.join(sans)}\n")
    _openssl("x509", "-req", "-in", str(d / "apiserver.csr"), "-CA", str(d / "ca.crt"), "-CAkey", str(d / "ca.key"),
             "-CAcreateserial", "-days", "7", "-extfile", str(d / "apiserver.ext"), "-out", str(d / "apiserver.crt"))
    _openssl("ec", "-in", str(d / "sa.key"), "-pubout", "-out", str(d / "sa.pub"))
    token = secrets.token_hex(24)
    (d / "tokens.csv").write_text(f"{token},admin,admin,system:masters\n")
    for p in d.iterdir():
        p.chmod(0o600)
    return Pki(dir=d, ca=d / "ca.crt", server_cert=d / "apiserver.crt", server_key=d / "apiserver.key",
               sa_key=d / "sa.key", sa_pub=d / "sa.pub", tokens=d / "tokens.csv", token=token)
