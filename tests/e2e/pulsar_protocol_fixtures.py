"""What the tests of the official pulsar-client through the binary protocol proxy share: the proxy,
an official client on it, a quiet logger and a drain of an official consumer.

A test module takes the fixtures by importing them (`from e2e.pulsar_protocol_fixtures import
official_fixture, proxy_fixture`): pytest then defines them in that module, so the module-scoped
proxy is one per test module. Their functions are named apart from the fixtures (`name=`), so that
a test's `official` argument does not shadow the import."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest

pulsar = pytest.importorskip("pulsar")

from magnetar.protocol import ProxySettings, ProxyThread  # noqa: E402


@pytest.fixture(scope="module", name="proxy")
def proxy_fixture(cluster) -> Iterator[ProxyThread]:  # type: ignore[no-untyped-def]
    """The proxy in this process, on the session cluster's AWS endpoint (as `local up` runs it)."""
    p = ProxyThread(ProxySettings(port=0)).start()
    yield p
    p.stop()


@pytest.fixture(name="official")
def official_fixture(proxy: ProxyThread) -> Iterator[pulsar.Client]:
    c = pulsar.Client(proxy.service_url, operation_timeout_seconds=15, logger=quiet_logger())
    yield c
    c.close()


def quiet_logger() -> logging.Logger:
    logger = logging.getLogger("pulsar-client")
    logger.setLevel(logging.WARNING)
    return logger


def drain(consumer, count: int, timeout_s: float = 15) -> list:  # type: ignore[no-untyped-def]
    """`count` messages from an official consumer, each acknowledged."""
    out = []
    deadline = time.monotonic() + timeout_s
    while len(out) < count and time.monotonic() < deadline:
        try:
            msg = consumer.receive(timeout_millis=1000)
        except pulsar.Timeout:
            continue
        consumer.acknowledge(msg)
        out.append(msg)
    return out
