"""Who is calling: API Gateway's authorizer output, read by the functions behind it.

On AWS, API Gateway runs the authorizer (`functions/authorizer`) before the broker: it turns a
token into `{"role", "exp"}` (or `{"refused": why}`) and API Gateway passes that context to the
broker in `requestContext.authorizer.lambda` (HTTP API) or `requestContext.authorizer` (WebSocket
$connect). Basic credentials (Pulsar's basic provider, `magnetar.security.basic`) yield the user name as
the role, the same context without `exp`. A caller signing with SigV4 on the IAM-authorized API arrives with
`requestContext.authorizer.iam` instead; its role is its principal ARN (an assumed role's session
ARN is read as the role's ARN, so grants name roles, not sessions). The local runtime emulates
both and fills in the same fields.

`exp` travels with the cached authorizer result, so a token that expires while API Gateway still
caches its result is refused here, at its expiry, not at the cache's.
"""

from __future__ import annotations

import base64
import json
import os
import re
import time
from collections.abc import Mapping
from functools import cache
from typing import Any

from magnetar.config import ENV_TOKEN_KEYS_SECRET, ENV_TOKEN_PUBLIC_KEY, ENV_TOKEN_SECRET_KEY
from magnetar.core.authz import ANONYMOUS, Principal
from magnetar.security.basic import InvalidCredentials, basic_credentials
from magnetar.security.basic import authenticate as authenticate_basic
from magnetar.security.tokens import (
    InvalidToken,
    TokenValidator,
    VerificationKey,
    bearer_token,
    public_verification_key,
    read_key_material,
    secret_verification_key,
)

KEYS_CACHE_S = 300  # the key secret is re-read at most this often (a rotation keeps both keys valid longer)
_ASSUMED_ROLE = re.compile(r"^arn:(?P<part>aws[\w-]*):sts::(?P<account>\d{12}):assumed-role/(?P<role>[^/]+)/.+$")


def iam_role(arn: str) -> str:
    """The role a principal ARN is granted as: an STS assumed-role session counts as its IAM role."""
    match = _ASSUMED_ROLE.match(arn)
    if match:
        return f"arn:{match['part']}:iam::{match['account']}:role/{match['role']}"
    return arn


def _from_context(context: Mapping[str, Any]) -> Principal:
    refused = context.get("refused")
    if refused:
        return Principal(None, str(refused))
    role = context.get("role")
    if not role:
        return ANONYMOUS
    exp = int(context.get("exp") or 0)
    if exp and exp <= time.time():
        return Principal(None, "Token expired")
    return Principal(str(role))


def principal_of_http_event(event: Mapping[str, Any]) -> Principal:
    """The caller of an HTTP API (payload v2) request, as its authorizer established."""
    authorizer = (event.get("requestContext") or {}).get("authorizer") or {}
    iam = authorizer.get("iam")
    if iam and iam.get("userArn"):
        return Principal(iam_role(str(iam["userArn"])))
    return _from_context(authorizer.get("lambda") or {})


def principal_of_websocket_connect(event: Mapping[str, Any]) -> Principal:
    """The caller of a WebSocket $connect, as its REQUEST authorizer established."""
    return _from_context((event.get("requestContext") or {}).get("authorizer") or {})


# --- the authorizer's side: from credentials to a role ----------------------------------------
def credentials(headers: Mapping[str, str], query: Mapping[str, str]) -> str | None:
    """The token a request presents: `Authorization: Bearer` or (browsers' WebSockets) `?token=`."""
    lowered = {k.lower(): v for k, v in headers.items()}
    return bearer_token(lowered.get("authorization")) or (query.get("token") or None)


def authorizer_context(token: str | None, validator: TokenValidator) -> dict[str, Any]:
    """What the authorizer hands API Gateway: the role and expiry, or why the token was refused.

    A refused token is still passed on (and cached) with the reason, so that the broker answers
    401 with Pulsar's `{"reason": ...}` rather than API Gateway's bare 403."""
    if token is None:
        return {"refused": "No token: send Authorization: Bearer <token>"}
    try:
        claims = validator.claims(token)
    except InvalidToken as exc:
        return {"refused": str(exc)}
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        return {"refused": "Token has no subject (role)"}
    return {"role": subject, "exp": int(claims.get("exp") or 0)}


def authenticate_request(headers: Mapping[str, str], query: Mapping[str, str]) -> dict[str, Any]:
    """The authorizer's answer for a request's credentials, whichever provider they are for:
    `Authorization: Basic` (Pulsar's basic provider: the role is the user name), else a token
    (`Authorization: Bearer` or `?token=`). A basic provider that cannot be read (a missing or
    malformed file) refuses with the reason rather than failing the authorizer (API Gateway would
    answer 500)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    try:
        basic = basic_credentials(lowered.get("authorization"))
        if basic is not None:
            return {"role": authenticate_basic(*basic)}
    except InvalidCredentials as exc:
        return {"refused": str(exc)}
    except (ValueError, OSError) as exc:
        return {"refused": f"Basic authentication is not available: {exc}"}
    token = credentials(headers, query)
    if token is None:
        return {"refused": "No credentials: send Authorization: Bearer <token> or Authorization: Basic"}
    try:
        validator = validator_from_environment()
    except ValueError as exc:  # no token keys configured (a basic-only deployment)
        return {"refused": f"Token authentication is not available: {exc}"}
    return authorizer_context(token, validator)


def keys_from_secret(secret: str) -> list[VerificationKey]:
    """The key secret's JSON: `{"keys": [{"algorithm": "HS256", "key": "<base64>"},
    {"algorithm": "RS256", "key": "<PEM or base64 DER public key>"}]}` - every key valid now."""
    try:
        document = json.loads(secret)
        entries = document["keys"]
    except (ValueError, KeyError, TypeError):
        raise ValueError("The token key secret must be JSON with a list `keys`") from None
    keys = []
    for entry in entries:
        material = str(entry["key"])
        raw = material.encode() if material.lstrip().startswith("-----") else base64.b64decode(material)
        algorithm = str(entry.get("algorithm", "HS256"))
        keys.append(secret_verification_key(raw) if algorithm == "HS256" else public_verification_key(raw))
    return keys


def _keys_from_environment() -> list[VerificationKey]:
    keys = []
    if os.environ.get(ENV_TOKEN_SECRET_KEY):
        keys.append(secret_verification_key(read_key_material(os.environ[ENV_TOKEN_SECRET_KEY])))
    if os.environ.get(ENV_TOKEN_PUBLIC_KEY):
        keys.append(public_verification_key(read_key_material(os.environ[ENV_TOKEN_PUBLIC_KEY])))
    return keys


@cache
def _static_validator() -> TokenValidator:
    return TokenValidator(_keys_from_environment())


def validator_from_environment() -> TokenValidator:
    """The keys this process trusts: the Secrets Manager secret named by MAGNETAR_TOKEN_KEYS_SECRET
    (re-read every 5 minutes, so a rotation needs no redeploy), else the key settings."""
    secret_id = os.environ.get(ENV_TOKEN_KEYS_SECRET)
    if not secret_id:
        return _static_validator()
    from aws_lambda_powertools.utilities import parameters

    value = parameters.get_secret(secret_id, max_age=KEYS_CACHE_S)
    return _validator_of(value if isinstance(value, str) else value.decode())


@cache
def _validator_of(secret: str) -> TokenValidator:
    return TokenValidator(keys_from_secret(secret))
