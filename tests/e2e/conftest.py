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
