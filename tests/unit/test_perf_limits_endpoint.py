"""`magnetar perf` measures the raw limits where each service really is: the per-service endpoint variables
(DynamoDB Local beside LocalStack) win over the general endpoint, as in the AWS SDKs."""

from __future__ import annotations

import pytest

from magnetar.perf.limits import endpoint_for

GENERAL, DYNAMODB = "http://127.0.0.1:4566", "http://127.0.0.1:8000"


def test_a_per_service_variable_wins_over_the_environments_general_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", GENERAL)
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", DYNAMODB)
    assert endpoint_for("dynamodb", GENERAL) == DYNAMODB
    assert endpoint_for("kinesis", GENERAL) == GENERAL
    assert endpoint_for("s3", GENERAL) == GENERAL


def test_an_endpoint_of_its_own_is_used_for_every_service(monkeypatch: pytest.MonkeyPatch) -> None:
    # perf's own `local up` (moto on a free port) while the shell points elsewhere
    monkeypatch.setenv("AWS_ENDPOINT_URL", GENERAL)
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", DYNAMODB)
    assert endpoint_for("dynamodb", "http://127.0.0.1:4999") == "http://127.0.0.1:4999"
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    assert endpoint_for("dynamodb", GENERAL) == GENERAL
