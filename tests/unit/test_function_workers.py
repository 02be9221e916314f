"""The local runtime's function workers (magnetar.local.function_workers): a worker's start (a
process spawned, its imports, its broker) is the execution environment's creation, not the
invocation's time; the function's timeout counts from when the worker is ready."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from magnetar.local.function_workers import FunctionWorkers, WorkerFailed

# an event the worker's host refuses at once (its configuration is not JSON): it answers an error
BAD_CONFIG = {"fqfn": "public/default/f", "config": "{"}


@pytest.fixture
def workers(monkeypatch: pytest.MonkeyPatch) -> Iterator[FunctionWorkers]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")  # (the worker builds its broker's clients)
    workers = FunctionWorkers()
    yield workers
    workers.close()


def test_a_workers_start_does_not_count_in_a_short_timeout(workers: FunctionWorkers) -> None:
    # a process started and importing takes far longer than 0.1 s: counted in the invocation, every
    # invocation timed out, killing the worker the next one started again
    with pytest.raises(RuntimeError) as raised:
        workers.invoke(BAD_CONFIG, timeout_s=0.1)
    assert not isinstance(raised.value, WorkerFailed), raised.value  # the worker ran the event
    pid = workers.pids()["public/default/f"]
    with pytest.raises(RuntimeError) as again:
        workers.invoke(BAD_CONFIG, timeout_s=0.1)
    assert not isinstance(again.value, WorkerFailed), again.value
    assert workers.pids()["public/default/f"] == pid  # the same worker, kept warm


def test_a_worker_that_does_not_start_in_time_fails_the_invocation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    workers = FunctionWorkers(start_timeout_s=0.01)
    try:
        with pytest.raises(WorkerFailed, match="did not start within"):
            workers.invoke(BAD_CONFIG, timeout_s=30)
        assert "public/default/f" not in workers.pids()  # discarded: the next invocation starts another
    finally:
        workers.close()
