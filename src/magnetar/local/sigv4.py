"""SigV4 verification for the emulated IAM-authorized API (what API Gateway does on AWS).

The signature is recomputed with botocore's own signer over the headers the caller signed and
compared in constant time; the secret key comes from the emulator's IAM (moto keeps access keys
of IAM users and of STS sessions, readable on its `/moto-api/data.json`). Differences from AWS,
by construction: only keys the emulator's IAM issued verify (the `test`/`test` default does not);
an STS session is reported as its role's ARN (moto does not keep session names); IAM policies
(execute-api:Invoke) are not evaluated - every valid signature is let through and Magnetar's own
grants decide, which is how the deployed stack is configured too.
"""

from __future__ import annotations

import hmac
import json
import re
import threading
import time
import urllib.request
from calendar import timegm
from dataclasses import dataclass
from typing import Any

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

ALGORITHM = "AWS4-HMAC-SHA256"
MAX_SKEW_S = 15 * 60  # AWS refuses signatures older or newer than 15 minutes
DEFAULT_ACCOUNT = "123456789012"  # moto's account id
_CREDENTIAL = re.compile(r"Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/(?P<service>[^/]+)/aws4_request")
_SIGNED = re.compile(r"SignedHeaders=(?P<headers>[^,\s]+)")
_SIGNATURE = re.compile(r"Signature=(?P<sig>[0-9a-f]{64})")


class SignatureRefused(Exception):
    """API Gateway answers 403 with this message."""


@dataclass(frozen=True)
class IamIdentity:
    access_key: str
    secret_key: str
    arn: str
    account: str


class EmulatorIam:
    """Access keys the emulator's IAM issued, re-read when an unknown key shows up."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint.rstrip("/")
        self._keys: dict[str, IamIdentity] = {}
        self._lock = threading.Lock()

    def identity(self, access_key: str) -> IamIdentity | None:
        with self._lock:
            if access_key not in self._keys:
                self._keys = self._load()
            return self._keys.get(access_key)

    def _load(self) -> dict[str, IamIdentity]:
        try:
            with urllib.request.urlopen(f"{self.endpoint}/moto-api/data.json", timeout=10) as response:
                data: dict[str, Any] = json.load(response)
        except (OSError, ValueError):  # not moto (LocalStack...): no IAM keys to verify against
            return {}
        keys = {}
        for key in (data.get("iam") or {}).get("AccessKey", []):
            if key.get("status", "Active") != "Active":
                continue
            if key.get("role_arn"):
                arn = str(key["role_arn"])
            else:
                arn = f"arn:aws:iam::{DEFAULT_ACCOUNT}:user/{key.get('user_name')}"
            account = arn.split(":")[4] or DEFAULT_ACCOUNT
            keys[key["access_key_id"]] = IamIdentity(key["access_key_id"], key["secret_access_key"], arn, account)
        return keys


def is_sigv4(authorization: str | None) -> bool:
    return bool(authorization) and str(authorization).startswith(ALGORITHM)


def verify(iam: EmulatorIam, method: str, url: str, headers: dict[str, str], body: bytes,
           now: float | None = None) -> IamIdentity:
    """The caller of a SigV4-signed request, or SignatureRefused."""
    lowered = {k.lower(): v for k, v in headers.items()}
    authorization = lowered.get("authorization", "")
    credential, signed, signature = (_CREDENTIAL.search(authorization), _SIGNED.search(authorization),
                                     _SIGNATURE.search(authorization))
    amz_date = lowered.get("x-amz-date", "")
    if not (credential and signed and signature and amz_date):
        raise SignatureRefused("Authorization header requires Credential, SignedHeaders, Signature and X-Amz-Date")
    try:
        signed_at = timegm(time.strptime(amz_date, "%Y%m%dT%H%M%SZ"))
    except ValueError:
        raise SignatureRefused("X-Amz-Date is not in the ISO8601 basic format") from None
    if abs((time.time() if now is None else now) - signed_at) > MAX_SKEW_S:
        raise SignatureRefused("Signature expired: the request time is more than 15 minutes away from now")
    identity = iam.identity(credential["key"])
    if identity is None:
        raise SignatureRefused("The security token included in the request is invalid.")
    names = signed["headers"].split(";")
    request = AWSRequest(method=method, url=url, data=body,
                         headers={name: lowered[name] for name in names if name in lowered})
    request.context["timestamp"] = amz_date
    signer = SigV4Auth(Credentials(identity.access_key, identity.secret_key, lowered.get("x-amz-security-token")),
                       credential["service"], credential["region"])
    canonical = signer.canonical_request(request)
    expected = signer.signature(signer.string_to_sign(request, canonical), request)
    if not hmac.compare_digest(expected, signature["sig"]):
        raise SignatureRefused("The request signature we calculated does not match the signature you provided.")
    return identity
