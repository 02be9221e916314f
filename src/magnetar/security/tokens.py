"""Pulsar's token authentication: keys, tokens and their validation, with PyJWT.

Formats follow `pulsar tokens`: a secret key file holds the raw key bytes (HS256); a key pair
is written as DER (PKCS#8 private key, X.509 SubjectPublicKeyInfo public key) for RS256; the
token's `sub` claim is the role, `exp` optional. Key files are read in DER or PEM, and a key
can be given as Pulsar's broker settings give it: `file:///path`, `data:;base64,...`, or a path.

A validator holds every key that is valid now: during a rotation the old and the new key both
verify (the signer uses the newest).
"""

from __future__ import annotations

import base64
import re
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

SECRET_KEY_BYTES = 32  # HS256, as `pulsar tokens create-secret-key`
RSA_KEY_BITS = 2048
ALGORITHMS = ("HS256", "RS256")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "y": 365 * 86400}


class InvalidToken(Exception):
    """The token is malformed, expired, or signed by no key we trust (HTTP 401)."""


@dataclass(frozen=True)
class VerificationKey:
    """One key that verifies tokens: the secret (HS256) or an RSA public key (RS256)."""

    algorithm: str
    key: Any  # bytes for HS256, an RSA public key for RS256


def parse_duration(text: str) -> int:
    """Pulsar's relative times: 30s, 10m, 3h, 1d, 2w, 1y (no unit: seconds)."""
    match = re.fullmatch(r"\s*(\d+)\s*([smhdwy]?)\s*", text)
    if not match:
        raise ValueError(f"Invalid duration {text!r}: a number with s, m, h, d, w or y")
    return int(match.group(1)) * _UNITS[match.group(2) or "s"]


def read_key_material(spec: str) -> bytes:
    """Key bytes from `file:///path`, `data:;base64,...` or a plain path."""
    if spec.startswith("data:"):
        _, _, payload = spec.partition(",")
        return base64.b64decode(payload)
    path = spec.removeprefix("file://")
    return Path(path).expanduser().read_bytes()


# --- keys -------------------------------------------------------------------------------------
def new_secret_key() -> bytes:
    return secrets.token_bytes(SECRET_KEY_BYTES)


def new_key_pair() -> tuple[bytes, bytes]:
    """(private key DER PKCS#8, public key DER SubjectPublicKeyInfo)."""
    private = rsa.generate_private_key(public_exponent=65537, key_size=RSA_KEY_BITS)
    private_der = private.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption())
    public_der = private.public_key().public_bytes(serialization.Encoding.DER,
                                                   serialization.PublicFormat.SubjectPublicKeyInfo)
    return private_der, public_der


def load_private_key(data: bytes) -> rsa.RSAPrivateKey:
    key = (serialization.load_pem_private_key(data, None) if data.lstrip().startswith(b"-----")
           else serialization.load_der_private_key(data, None))
    if not isinstance(key, rsa.RSAPrivateKey):
        raise ValueError("The private key is not an RSA key")
    return key


def load_public_key(data: bytes) -> rsa.RSAPublicKey:
    key = (serialization.load_pem_public_key(data) if data.lstrip().startswith(b"-----")
           else serialization.load_der_public_key(data))
    if not isinstance(key, rsa.RSAPublicKey):
        raise ValueError("The public key is not an RSA key")
    return key


def secret_verification_key(secret: bytes) -> VerificationKey:
    if len(secret) < SECRET_KEY_BYTES:
        raise ValueError(f"A secret key must have at least {SECRET_KEY_BYTES} bytes")
    return VerificationKey("HS256", secret)


def public_verification_key(public: bytes) -> VerificationKey:
    return VerificationKey("RS256", load_public_key(public))


# --- tokens -----------------------------------------------------------------------------------
def create_token(subject: str, *, secret_key: bytes | None = None, private_key: bytes | None = None,
                 expires_in_s: int | None = None, now: float | None = None) -> str:
    """A token for role `subject`, signed HS256 with the secret key or RS256 with the private key."""
    if not subject:
        raise ValueError("The subject (role) must not be empty")
    if (secret_key is None) == (private_key is None):
        raise ValueError("Give exactly one of a secret key or a private key")
    claims: dict[str, Any] = {"sub": subject}
    if expires_in_s is not None:
        claims["exp"] = int((time.time() if now is None else now) + expires_in_s)
    if secret_key is not None:
        return jwt.encode(claims, secret_verification_key(secret_key).key, algorithm="HS256")
    assert private_key is not None
    return jwt.encode(claims, load_private_key(private_key), algorithm="RS256")


class TokenValidator:
    """Verifies a token against every key valid now; returns its role (the `sub` claim)."""

    def __init__(self, keys: Iterable[VerificationKey]) -> None:
        self.keys = tuple(keys)
        if not self.keys:
            raise ValueError("Token authentication needs at least one key")

    def claims(self, token: str) -> dict[str, Any]:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise InvalidToken(f"Malformed token: {exc}") from None
        algorithm = header.get("alg")
        if algorithm not in ALGORITHMS:  # "none" and anything else we do not issue
            raise InvalidToken(f"Unsupported token algorithm {algorithm!r}")
        expired = False
        for key in (k for k in self.keys if k.algorithm == algorithm):
            try:
                claims: dict[str, Any] = jwt.decode(token, key.key, algorithms=[algorithm],
                                                    options={"require": ["sub"], "verify_aud": False})
                return claims
            except jwt.ExpiredSignatureError:
                expired = True
            except jwt.PyJWTError:
                continue
        raise InvalidToken("Token expired" if expired else "Token signature does not verify")

    def role(self, token: str) -> str:
        subject = self.claims(token).get("sub")
        if not isinstance(subject, str) or not subject:
            raise InvalidToken("Token has no subject (role)")
        return subject


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header (None when absent or another scheme)."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None
