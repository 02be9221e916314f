"""API Gateway's request authorization, emulated in front of the local functions.

As the deployed stack (infra/): the HTTP API runs the Lambda authorizer (`functions/authorizer`,
payload 2.0, simple responses) on every route but the public ones, identity source the
`Authorization` header (a token, or Basic credentials), results cached per header value for
`cache_ttl_s`; a request without the header is refused with 401 before any function runs. A request signed with SigV4 is what
the stack's IAM-authorized API serves: it is verified here (`magnetar.local.sigv4`) and reaches
the broker with `requestContext.authorizer.iam`. The WebSocket API's $connect runs the same
authorizer as a REQUEST authorizer with no identity source (no caching): a token in the
`Authorization` header or in `?token=`, or Basic credentials in the header.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from magnetar.config import PUBLIC_ROUTES
from magnetar.local.lambda_runtime import LocalFunction
from magnetar.local.sigv4 import EmulatorIam, SignatureRefused, is_sigv4, verify

REGION, ACCOUNT, API_ID = "us-east-1", "000000000000", "local"


class Refused(Exception):
    """API Gateway's own refusal: the status and the message it answers with."""

    def __init__(self, status: int, message: str, reason: str) -> None:
        super().__init__(message)
        self.status, self.message, self.reason = status, message, reason

    def body(self) -> dict[str, str]:
        # API Gateway's body is {"message": ...}; `reason` (Pulsar's field) is added locally only
        return {"message": self.message, "reason": self.reason}


@dataclass
class LocalAuthorizers:
    function: LocalFunction
    iam: EmulatorIam
    cache_ttl_s: float = 300.0
    _cache: dict[str, tuple[float, dict[str, Any]]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def http(self, event: dict[str, Any], url: str, body: bytes) -> dict[str, Any] | None:
        """The `requestContext.authorizer` of an HTTP API request (None for a public route)."""
        context = event["requestContext"]
        method, path = context["http"]["method"], context["http"]["path"]
        if f"{method} {path}" in PUBLIC_ROUTES:
            return None
        authorization = event["headers"].get("authorization")
        if is_sigv4(authorization):
            try:
                identity = verify(self.iam, method, url, event["headers"], body)
            except SignatureRefused as exc:
                raise Refused(403, str(exc), f"Authentication failed: {exc}") from None
            return {"iam": {"accessKey": identity.access_key, "accountId": identity.account,
                            "userArn": identity.arn, "callerId": identity.access_key, "principalOrgId": None,
                            "userId": identity.access_key, "cognitoIdentity": None}}
        if not authorization:
            raise Refused(401, "Unauthorized", "Authentication required: send a token "
                          "(Authorization: Bearer <token>), basic credentials (Authorization: Basic) "
                          "or sign the request with AWS SigV4")
        return {"lambda": self._cached(authorization, event)}

    def _cached(self, identity_source: str, event: dict[str, Any]) -> dict[str, Any]:
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(identity_source)
        if hit is not None and hit[0] > now:
            return hit[1]
        context = event["requestContext"]
        request = {
            **{k: v for k, v in event.items() if k not in ("body", "isBase64Encoded")},
            "type": "REQUEST",
            "routeArn": f"arn:aws:execute-api:{REGION}:{ACCOUNT}:{API_ID}/$default/"
                        f"{context['http']['method']}{context['http']['path']}",
            "identitySource": [identity_source],
        }
        result = self.function.invoke(request)
        if not result.get("isAuthorized"):
            raise Refused(403, "Forbidden", "The authorizer refused the request")
        authorizer_context = dict(result.get("context") or {})
        with self._lock:
            self._cache[identity_source] = (now + self.cache_ttl_s, authorizer_context)
        return authorizer_context

    def websocket(self, connection_id: str, headers: dict[str, str], query: dict[str, str]) -> dict[str, Any]:
        """The `requestContext.authorizer` of a $connect (Refused: the upgrade is refused)."""
        request = {
            "type": "REQUEST",
            "methodArn": f"arn:aws:execute-api:{REGION}:{ACCOUNT}:{API_ID}/$default/$connect",
            "headers": headers,
            "multiValueHeaders": {k: [v] for k, v in headers.items()},
            "queryStringParameters": query,
            "multiValueQueryStringParameters": {k: [v] for k, v in query.items()},
            "stageVariables": {},
            "requestContext": {"routeKey": "$connect", "eventType": "CONNECT", "connectionId": connection_id,
                               "apiId": API_ID, "stage": "$default", "requestId": uuid.uuid4().hex},
        }
        try:
            result = self.function.invoke(request)
        except Exception:  # the authorizer raised ("Unauthorized"): API Gateway answers 401
            raise Refused(401, "Unauthorized", "The authorizer refused the connection") from None
        statements = ((result.get("policyDocument") or {}).get("Statement")) or []
        if not any(s.get("Effect") == "Allow" for s in statements):
            raise Refused(403, "Forbidden", "The authorizer denied the connection")
        return {"principalId": result.get("principalId"), **(result.get("context") or {})}
