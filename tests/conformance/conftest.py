"""Fixtures of the conformance suite: Pulsar's documented behaviours, through the SDK, against
the session's local cluster (`cluster`, from tests/conftest.py).

pytest runs with --import-mode=importlib and conftest fixtures are per directory, so the
`client`, `topic` and crash-point fixtures of tests/e2e/conftest.py are repeated here.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

import magnetar
from magnetar.core import crashpoints


@pytest.fixture
def client(cluster) -> Iterator[magnetar.Client]:  # type: ignore[no-untyped-def]
    c = magnetar.Client(cluster.url)
    yield c
    c.close()


@pytest.fixture
def topic() -> str:
    return f"persistent://public/default/t-{uuid.uuid4().hex[:10]}"


@pytest.fixture(autouse=True)
def _no_crash_points() -> Iterator[None]:
    yield
    crashpoints.disable_all()
