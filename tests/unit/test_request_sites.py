"""The request counter's diagnostic by call site (MAGNETAR_REQUEST_SITES): requests counted by the
core functions that made them, the plain counts unchanged."""

from __future__ import annotations

from typing import Any

from magnetar.adapters.aws.clients import RequestCounter


def _core_caller() -> Any:
    """A function that looks like Magnetar's core to the frame walk (its code's file name)."""
    source = "def publish(counter):\n    counter(event_name='before-send.dynamodb.GetItem')\n"
    namespace: dict[str, Any] = {}
    exec(compile(source, "/srv/src/magnetar/core/ledger/fake.py", "exec"), namespace)
    return namespace["publish"]


def test_requests_are_counted_by_the_core_function_that_made_them() -> None:
    counter = RequestCounter(by_site=True)
    publish = _core_caller()
    publish(counter)
    publish(counter)
    counter(event_name="before-send.s3.PutObject")  # from no core function
    assert counter.snapshot() == {"dynamodb.GetItem": 2, "s3.PutObject": 1}
    assert counter.sites() == {"dynamodb.GetItem@core/ledger/fake.py:publish": 2, "s3.PutObject@": 1}
    counter.reset()
    assert counter.sites() == {} and counter.snapshot() == {}


def test_without_the_diagnostic_only_operations_are_counted() -> None:
    counter = RequestCounter()
    _core_caller()(counter)
    assert counter.snapshot() == {"dynamodb.GetItem": 1} and counter.sites() == {}
