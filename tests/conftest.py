"""Shared fixtures: one local cluster (emulator subprocess + HTTP API + event-source mapping)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")


@pytest.fixture(scope="session")
def cluster() -> Iterator[object]:
    from magnetar.local.cluster import LocalCluster, free_port

    # the maintenance schedule runs when a test asks (POST /_magnetar/local/schedules/maintenance)
    c = LocalCluster(port=free_port(), aws_port=free_port(), poll_interval_s=0.2, maintenance_interval_s=0)
    c.start()
    yield c
    c.stop()


@pytest.fixture
def client(cluster):  # type: ignore[no-untyped-def]
    import magnetar

    c = magnetar.Client(cluster.url)
    yield c
    c.close()


@pytest.fixture
def admin(cluster):  # type: ignore[no-untyped-def]
    from magnetar.client.admin import AdminClient

    a = AdminClient(cluster.url)
    yield a
    a.close()


@pytest.fixture
def topic() -> str:
    return f"persistent://public/default/t-{uuid.uuid4().hex[:10]}"


@pytest.fixture(autouse=True)
def _no_crash_points() -> Iterator[None]:
    """A test that arms a crash point never leaves it armed for the next one."""
    yield
    from magnetar.core import crashpoints

    crashpoints.disable_all()
