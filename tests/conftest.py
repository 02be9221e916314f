"""Shared fixtures: one local cluster (emulator subprocess + HTTP API + event-source mapping)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")


@pytest.fixture(scope="session")
def cluster() -> Iterator[object]:
    from magnetar.local.cluster import LocalCluster, free_port

    c = LocalCluster(port=free_port(), aws_port=free_port(), poll_interval_s=0.2)
    c.start()
    yield c
    c.stop()
