"""The Lambda authorizer: API Gateway runs it before the broker (HTTP API) and on WebSocket $connect.

It only says who the caller is (`magnetar.security.identity`): a token's subject, or with
`Authorization: Basic` a user of Pulsar's basic provider (`magnetar.security.basic`); what that
role may do is the broker's decision (`magnetar.core.authz`). Two shapes of the same answer:

- **HTTP API** (payload format 2.0, simple responses): always `isAuthorized: true` with the
  context `{"role", "exp"}` or `{"refused": reason}`. A refused token is let through on purpose:
  the broker refuses every request without a role, and answers 401 with Pulsar's `{"reason"}`
  body instead of API Gateway's bare 403. API Gateway caches the answer per Authorization header;
  `exp` travels in the context, so the broker refuses a token at its expiry even while the
  answer is still cached.
- **WebSocket $connect** (REQUEST authorizer, `methodArn`): an IAM policy allowing
  `execute-api:Invoke` on the method, the role (or "anonymous") as principal, the same context
  (flat strings and numbers: API Gateway refuses nested values). The WebSocket function refuses
  the upgrade when the context holds no role. No identity source is configured, so the token may
  come as `Authorization: Bearer` or, from browsers, as `?token=`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from magnetar.adapters.aws.telemetry import EmfMetrics, LambdaTelemetry
from magnetar.core.metrics import AUTHORIZATIONS, AUTHORIZER_DENIALS
from magnetar.security import identity

logger = Logger()
telemetry = LambdaTelemetry()
metrics = EmfMetrics()
ANONYMOUS_PRINCIPAL = "anonymous"


@logger.inject_lambda_context(clear_state=True)
@telemetry.instrument
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    answer = identity.authenticate_request(_strings(event.get("headers")),
                                           _strings(event.get("queryStringParameters")))
    # never log the credentials; the role and the refusal reason are what an operator needs
    logger.info("authorized", extra={"role": answer.get("role"), "refused": answer.get("refused")})
    metrics.add(AUTHORIZATIONS, 1)
    if answer.get("refused"):
        metrics.add(AUTHORIZER_DENIALS, 1)
    if "methodArn" in event:  # WebSocket REQUEST authorizer (REST-style policy response)
        return _policy(str(event["methodArn"]), answer)
    return {"isAuthorized": True, "context": answer}


def _strings(values: Mapping[str, Any] | None) -> dict[str, str]:
    """Headers or query parameters as API Gateway sends them (absent: None)."""
    return {str(k): str(v) for k, v in (values or {}).items() if v is not None}


def _flat(answer: Mapping[str, Any]) -> dict[str, str | int | float | bool]:
    """A context API Gateway accepts: string, number or boolean values only, no None."""
    flat: dict[str, str | int | float | bool] = {}
    for key, value in answer.items():
        if value is None:
            continue
        flat[key] = value if isinstance(value, str | int | float | bool) else str(value)
    return flat


def _policy(method_arn: str, answer: Mapping[str, Any]) -> dict[str, Any]:
    role = answer.get("role")
    return {
        "principalId": str(role) if role else ANONYMOUS_PRINCIPAL,
        "policyDocument": {
            "Version": "2012-10-17",
            "Statement": [{"Action": "execute-api:Invoke", "Effect": "Allow", "Resource": method_arn}],
        },
        "context": _flat(answer),
    }
