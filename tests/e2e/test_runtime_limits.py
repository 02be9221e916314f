"""The local runtime's AWS fidelity (`magnetar.local.fidelity`): Lambda's account concurrency and
6 MB response, API Gateway's 30 s integration timeout, the WebSocket API's idle timeout and
connection limit, throttled asynchronous and event-source invocations, and modeled latency.

The emulation's parts are driven directly — build_app and LocalWebSocketApi served by uvicorn on
a free port, LocalFunctions pointing at tests/fixtures_local/runtime_limits — with the timing
limits shortened; no emulator process, and nothing of the session's cluster is touched."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from http_helpers import HTTP
from magnetar.local.apigw import build_app
from magnetar.local.cluster import free_port
from magnetar.local.esm import KinesisEventSourceMapping, poll_interval
from magnetar.local.fidelity import (
    AWS_TIMEOUTS,
    LAMBDA_COLD_START,
    AwsFidelity,
    LatencyModel,
    RuntimeTimeouts,
)
from magnetar.local.lambda_runtime import (
    MAX_RESPONSE_BYTES,
    LambdaSettings,
    LocalFunction,
    ResponseTooLarge,
    Throttled,
    configure,
)
from magnetar.local.scheduler import Schedule
from magnetar.local.websocket import MAX_MESSAGE_BYTES

CODE_DIR = "tests/fixtures_local/runtime_limits"
LIMITS = AwsFidelity(limits=True, lambda_concurrency=2)
SHORT = RuntimeTimeouts(http_integration_s=0.5, websocket_idle_s=0.6, websocket_max_connection_s=1.5)
INTERNAL = {"message": "Internal Server Error"}


def functions(fidelity: AwsFidelity, *names: str, latency: LatencyModel | None = None) -> list[LocalFunction]:
    """Functions of one account: one settings object, one concurrency pool."""
    fns = [LocalFunction(name, CODE_DIR) for name in names]
    configure(LambdaSettings.from_fidelity(fidelity, latency), tuple(fns))
    return fns


@contextlib.contextmanager
def serve(app: Starlette) -> Iterator[str]:
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=5)


@pytest.fixture
def log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "invocations.jsonl"
    monkeypatch.setenv("RUNTIME_LIMITS_LOG", str(path))
    return path


def records(path: Path, kind: str | None = None) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines() if line]
    return [r for r in lines if kind is None or r["kind"] == kind]


def wait_for(condition: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def get_all(base: str, paths: list[str]) -> list[httpx.Response]:
    with ThreadPoolExecutor(len(paths)) as pool:
        return list(pool.map(lambda p: HTTP.get(f"http://{base}{p}", timeout=30), paths))


# --- Lambda: the account's concurrency ------------------------------------------------------------
def test_invocations_beyond_the_accounts_concurrency_are_throttled_across_functions() -> None:
    broker, other = functions(LIMITS, "broker", "other")
    holder = threading.Thread(target=other.invoke, args=({"marker": "hold", "sleep": 1.0},))
    holder.start()  # another function of the account holds one of the 2 executions
    time.sleep(0.3)
    with serve(build_app(broker, fidelity=LIMITS)) as base:
        responses = get_all(base, ["/sleep/0.8", "/sleep/0.8"])
        assert sorted(r.status_code for r in responses) == [200, 500]
        throttled = next(r for r in responses if r.status_code == 500)
        assert throttled.json() == INTERNAL  # API Gateway's answer when Lambda refuses the invocation
        assert broker.throttles == 1 and broker.settings.concurrency is not None
        holder.join()
        assert HTTP.get(f"http://{base}/echo").status_code == 200  # the executions were given back
        assert broker.settings.concurrency.running == 0 and broker.settings.concurrency.peak == 2


def test_with_limits_off_nothing_is_throttled_nor_cut() -> None:
    (broker,) = functions(AwsFidelity(limits=False), "broker")
    with serve(build_app(broker, timeouts=SHORT)) as base:
        responses = get_all(base, ["/sleep/0.8"] * 3)  # longer than SHORT's integration timeout, too
        assert [r.status_code for r in responses] == [200] * 3
        big = HTTP.get(f"http://{base}/big/{MAX_RESPONSE_BYTES + 10}", timeout=30)
        assert big.status_code == 200 and len(big.content) == MAX_RESPONSE_BYTES + 10
    assert broker.throttles == 0


# --- Lambda: the 6 MB response ----------------------------------------------------------------------
def test_a_response_over_6_mb_is_a_function_error() -> None:
    (broker,) = functions(LIMITS, "broker")
    with serve(build_app(broker, fidelity=LIMITS)) as base:
        too_big = HTTP.get(f"http://{base}/big/{MAX_RESPONSE_BYTES}", timeout=30)  # plus the JSON around it
        assert too_big.status_code == 500 and too_big.json() == INTERNAL
        fits = HTTP.get(f"http://{base}/big/{MAX_RESPONSE_BYTES - 1000}", timeout=30)
        assert fits.status_code == 200 and len(fits.content) == MAX_RESPONSE_BYTES - 1000
    assert broker.errors == 1
    with pytest.raises(ResponseTooLarge, match="6291556 bytes"):
        broker.invoke({"rawPath": f"/big/{MAX_RESPONSE_BYTES}"})


# --- API Gateway HTTP API: the integration timeout ------------------------------------------------
def test_the_integration_times_out_with_503_while_the_function_runs_on(log: Path) -> None:
    (broker,) = functions(LIMITS, "broker")
    with serve(build_app(broker, fidelity=LIMITS, timeouts=SHORT)) as base:
        started = time.monotonic()
        late = HTTP.get(f"http://{base}/sleep/1.2", timeout=30)
        took = time.monotonic() - started
        assert late.status_code == 503 and late.json() == {"message": "Service Unavailable"}
        assert 0.5 <= took < 1.1
        assert records(log, "slept") == []  # still running
        wait_for(lambda: records(log, "slept"))  # and it ends (its executions held till then)
        wait_for(lambda: broker.settings.concurrency is not None and broker.settings.concurrency.running == 0)
        assert HTTP.get(f"http://{base}/sleep/0.1").status_code == 200  # within the timeout
    assert AWS_TIMEOUTS.http_integration_s == 30.0


# --- API Gateway WebSocket API ------------------------------------------------------------------------
def test_an_idle_websocket_is_closed_going_away_and_disconnect_says_so(log: Path) -> None:
    (ws_function,) = functions(LIMITS, "ws")
    (broker,) = functions(LIMITS, "broker")
    with serve(build_app(broker, websocket=ws_function, fidelity=LIMITS, timeouts=SHORT)) as base:
        with connect(f"ws://{base}/ws/v2/consumer/x", open_timeout=5) as ws:
            ws.send("hi")
            assert ws.recv(timeout=5) == "echo:hi"
            started = time.monotonic()
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=5)
            assert 0.3 <= time.monotonic() - started < 1.5
        assert closed.value.rcvd is not None and (closed.value.rcvd.code, closed.value.rcvd.reason) == (1001, "Going away")
        wait_for(lambda: records(log, "$disconnect"))
        assert records(log, "$disconnect")[0]["status"] == 1001
        assert records(log, "$disconnect")[0]["reason"] == "Going away"


def test_a_busy_websocket_is_closed_at_the_connection_limit() -> None:
    (ws_function,) = functions(LIMITS, "ws")
    (broker,) = functions(LIMITS, "broker")
    with serve(build_app(broker, websocket=ws_function, fidelity=LIMITS, timeouts=SHORT)) as base:
        with connect(f"ws://{base}/ws/v2/consumer/x", open_timeout=5) as ws:
            started, echoed = time.monotonic(), 0
            with pytest.raises(ConnectionClosed) as closed:
                while time.monotonic() - started < 5:
                    ws.send("tick")  # never idle
                    assert ws.recv(timeout=5) == "echo:tick"
                    echoed += 1
                    time.sleep(0.2)
            assert 1.4 <= time.monotonic() - started < 2.5 and echoed >= 5
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001


def test_websocket_sizes_are_enforced_whatever_the_limits_setting() -> None:
    (ws_function,) = functions(AwsFidelity(limits=False), "ws")
    (broker,) = functions(AwsFidelity(limits=False), "broker")
    with serve(build_app(broker, websocket=ws_function)) as base:
        with connect(f"ws://{base}/ws/v2/consumer/x", open_timeout=5, max_size=None) as ws:
            ws.send("x" * MAX_MESSAGE_BYTES)
            assert ws.recv(timeout=5) == "echo:" + "x" * MAX_MESSAGE_BYTES
            ws.send("x" * (MAX_MESSAGE_BYTES + 1))
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=5)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009


def test_post_to_connection_over_128_kb_is_refused(log: Path) -> None:
    (ws_function,) = functions(AwsFidelity(limits=False), "ws")
    (broker,) = functions(AwsFidelity(limits=False), "broker")
    api = build_app(broker, websocket=ws_function)
    with serve(api) as base, connect(f"ws://{base}/ws/v2/consumer/x", open_timeout=5) as ws:
        ws.send("who")
        assert ws.recv(timeout=5) == "echo:who"
        sockets = next(r for r in api.routes if getattr(r, "path", "") == "/@connections/{connection_id}")
        connection_id = next(iter(sockets.endpoint.__self__.sockets))  # type: ignore[attr-defined]
        url = f"http://{base}/@connections/{connection_id}"
        assert HTTP.post(url, content=b"y" * MAX_MESSAGE_BYTES).status_code == 200
        too_big = HTTP.post(url, content=b"y" * (MAX_MESSAGE_BYTES + 1))
        assert too_big.status_code == 413 and too_big.headers["x-amzn-ErrorType"] == "PayloadTooLargeException"
        assert len(ws.recv(timeout=5)) == MAX_MESSAGE_BYTES


# --- throttled asynchronous invocations, schedules and event-source batches are retried ---------------
def test_a_throttled_asynchronous_invocation_is_retried(log: Path) -> None:
    one = AwsFidelity(limits=True, lambda_concurrency=1)
    (ws_function,) = functions(one, "ws")
    with serve(build_app(ws_function, websocket=ws_function, fidelity=one)) as base:
        url = f"http://{base}/2015-03-31/functions/ws/invocations"
        holder = threading.Thread(target=ws_function.invoke, args=({"marker": "hold", "sleep": 0.8},))
        holder.start()
        time.sleep(0.2)
        sync = HTTP.post(url, json={"marker": "sync"})
        assert sync.status_code == 429 and sync.headers["x-amzn-ErrorType"] == "TooManyRequestsException"
        assert sync.json()["Reason"] == "ConcurrentInvocationLimitExceeded"
        assert HTTP.post(url, json={"marker": "async"}, headers={"X-Amz-Invocation-Type": "Event"}).status_code == 202
        holder.join()
        wait_for(lambda: [r["marker"] for r in records(log, "marker")] == ["hold", "async"], timeout_s=5)
    assert ws_function.throttles >= 2


def test_a_throttled_scheduled_run_waits_in_the_queue(log: Path) -> None:
    one = AwsFidelity(limits=True, lambda_concurrency=1)
    maintenance, other = functions(one, "maintenance", "other")
    schedule = Schedule(maintenance, 0)
    schedule.retry_first_s = 0.1
    holder = threading.Thread(target=other.invoke, args=({"marker": "hold", "sleep": 0.6},))
    holder.start()
    time.sleep(0.2)
    started = time.monotonic()
    assert schedule.run_now() == {"ran": True}
    assert time.monotonic() - started >= 0.3 and maintenance.throttles >= 1
    holder.join()


def test_a_throttled_event_source_batch_is_retried_not_failed(log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    one = AwsFidelity(limits=True, lambda_concurrency=1)
    consumer, other = functions(one, "consumer", "other")
    # no Kinesis client: boto clients are cached process-wide, and this one would miss the session
    # cluster's endpoint if it was made first
    monkeypatch.setattr("magnetar.local.esm.client", lambda service: None)
    esm = KinesisEventSourceMapping(consumer, "stream", 100, 0.0, retry_backoff_s=0.1)
    holder = threading.Thread(target=other.invoke, args=({"marker": "hold", "sleep": 0.6},))
    holder.start()
    time.sleep(0.2)
    batch = [{"PartitionKey": "k", "SequenceNumber": "1", "Data": b"x",
              "ApproximateArrivalTimestamp": dt.datetime.now(dt.UTC)}]
    assert esm._invoke_until_done("shardId-000000000000", batch) is None
    assert esm.throttled_invocations >= 1 and esm.failed_invocations == 0
    assert records(log, "batch") == [{"kind": "batch", "records": 1}]
    holder.join()


def test_the_event_source_mapping_polls_once_a_second_with_latency() -> None:
    assert poll_interval(AwsFidelity(latency=True), 0.2) == 1.0
    assert poll_interval(AwsFidelity(limits=False), 0.2) == 0.2  # the suite's fast poll
    assert poll_interval(AwsFidelity(limits=True), 1.0) == 1.0


# --- modeled latency --------------------------------------------------------------------------------
def test_latency_adds_a_cold_start_and_per_invocation_overhead() -> None:
    model = LatencyModel(seed=7)
    fidelity = AwsFidelity(latency=True, seed=7)
    (fn,) = functions(fidelity, "latent", latency=model)
    started = time.monotonic()
    fn.invoke({"rawPath": "/echo"})
    cold_s = time.monotonic() - started
    assert cold_s >= 0.3, "a cold start takes at least a few hundred ms"
    after_cold = model.added_s
    fn.invoke({"rawPath": "/echo"})
    warm_added = model.added_s - after_cold
    assert 0 < warm_added < 0.1, "a warm invocation adds a few ms"
    with serve(build_app(fn, fidelity=fidelity, latency=model)) as base:
        before = model.added_s
        assert HTTP.get(f"http://{base}/echo").status_code == 200
        assert model.added_s > before  # API Gateway's and Lambda's overhead
    a, b = LatencyModel(seed=3), LatencyModel(seed=3)  # seeded: reproducible
    assert [a.sample(LAMBDA_COLD_START) for _ in range(3)] == [b.sample(LAMBDA_COLD_START) for _ in range(3)]


def test_without_latency_nothing_is_added() -> None:
    (fn,) = functions(AwsFidelity(limits=False), "fast")
    assert fn.settings.latency is None and fn.settings.concurrency is None and not fn.settings.check_response_size
    fn.invoke({"rawPath": "/echo"})
    started = time.monotonic()
    fn.invoke({"rawPath": "/echo"})
    assert time.monotonic() - started < 0.05


def test_throttled_is_raised_before_the_function_runs(log: Path) -> None:
    one = AwsFidelity(limits=True, lambda_concurrency=1)
    fn, other = functions(one, "a", "b")
    holder = threading.Thread(target=other.invoke, args=({"marker": "hold", "sleep": 0.5},))
    holder.start()
    time.sleep(0.2)
    with pytest.raises(Throttled):
        fn.invoke({"marker": "never"})
    holder.join()
    assert [r["marker"] for r in records(log, "marker")] == ["hold"]


# --- `magnetar local up --aws-limits on --lambda-concurrency 1 --aws-latency`, end to end -------------
def test_local_up_with_limits_throttles_beyond_its_concurrency() -> None:
    import magnetar
    from magnetar.local.cluster import LocalUpProcess

    args = ["--aws-limits", "on", "--lambda-concurrency", "1", "--aws-latency"]
    with LocalUpProcess(maintenance_interval_s=0, extra_args=args) as stack:
        wait_for(lambda: _health(stack.url) == 200, timeout_s=30)
        client = magnetar.Client(stack.url)
        try:
            consumer = client.subscribe("runtime-limits", "s")
            polling = threading.Thread(target=_receive_quietly, args=(consumer, 4000))
            polling.start()  # its long poll holds the account's one execution
            time.sleep(1.5)
            assert _health(stack.url) == 500
            polling.join()
            wait_for(lambda: _health(stack.url) == 200, timeout_s=10)
            stats = HTTP.get(f"{stack.url}/_magnetar/local/stats").json()["lambda"]["magnetar-broker"]
            assert stats["throttles"] >= 1
        finally:
            client.close()


def _health(url: str) -> int:
    try:
        return HTTP.get(f"{url}/admin/v2/brokers/health", timeout=5).status_code
    except httpx.HTTPError:
        return 0


def _receive_quietly(consumer: Any, timeout_millis: int) -> None:
    with contextlib.suppress(Exception):
        consumer.receive(timeout_millis)
