"""Shared fixtures: one local cluster (emulator subprocess + HTTP API + event-source mapping)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from magnetar.config import LOCAL_RESOURCES, ResourceNames

os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")

# The session cluster runs on moto unless this names an already running AWS endpoint (LocalStack: `make
# test-localstack`, scripts/emulators.sh); per-service AWS_ENDPOINT_URL_<SERVICE> variables (DynamoDB Local)
# still win, as in every AWS SDK. Tests that start their own moto (LocalUpProcess...) stay on it.
EXTERNAL_AWS_ENDPOINT = os.environ.get("MAGNETAR_TEST_AWS_ENDPOINT") or None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "moto_only(reason): needs moto's server as the session's emulator")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """`--dist loadfile`: the longest files first (tests/scheduling.py)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from scheduling import TimedLoadFile

    return TimedLoadFile(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):  # the collection the controller's TimedLoadFile queues
        from scheduling import load_durations, ordered

        items[:] = [items[i] for i in ordered([item.nodeid for item in items], load_durations())]
    if not EXTERNAL_AWS_ENDPOINT:
        return
    for item in items:
        marker = item.get_closest_marker("moto_only")
        if marker is not None:
            why = marker.args[0] if marker.args else marker.kwargs.get("reason", "needs moto")
            item.add_marker(pytest.mark.skip(reason=f"moto only ({why}); the session runs on {EXTERNAL_AWS_ENDPOINT}"))


def session_resources() -> ResourceNames:
    """The session cluster's table, bucket and stream. On an external endpoint shared by pytest-xdist
    workers, each worker's cluster gets its own (as two stacks in one account): with one set, both
    clusters' journal consumers would seal and push the same records (on moto each worker has its
    own emulator)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not (EXTERNAL_AWS_ENDPOINT and worker):
        return LOCAL_RESOURCES
    return ResourceNames(f"{LOCAL_RESOURCES.table}-{worker}", f"{LOCAL_RESOURCES.bucket}-{worker}",
                         f"{LOCAL_RESOURCES.stream}-{worker}")


@pytest.fixture(scope="session")
def cluster() -> Iterator[object]:
    from magnetar.local.cluster import LocalCluster, free_port

    # the maintenance schedule runs when a test asks (POST /_magnetar/local/schedules/maintenance)
    c = LocalCluster(port=free_port(), aws_port=free_port(), aws_endpoint=EXTERNAL_AWS_ENDPOINT,
                     poll_interval_s=0.2, maintenance_interval_s=0, names=session_resources())
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


@pytest.fixture
def verify_timings(monkeypatch: pytest.MonkeyPatch) -> None:
    """A verify run shortens the write deadline, hole grace and delay for itself (environment and
    loaded modules); the tests after it in this process get the real ones back."""
    import magnetar.core.ledger as ledger
    from magnetar.core import delaypoints

    for name in (ledger.common.ENV_WRITE_DEADLINE_MS, ledger.common.ENV_HOLE_GRACE_MS, delaypoints.ENV_DELAY_MS):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(ledger.common, "WRITE_DEADLINE_MS", ledger.common.WRITE_DEADLINE_MS)
    monkeypatch.setattr(ledger.common, "HOLE_GRACE_MS", ledger.common.HOLE_GRACE_MS)
    monkeypatch.setattr(delaypoints, "duration_ms", delaypoints.duration_ms)
