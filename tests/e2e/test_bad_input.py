"""Bad input gets a 4xx with {"reason"}, never a 500, and nothing is half-written."""

from __future__ import annotations

import base64

import httpx
import pytest

import magnetar
from http_helpers import HTTP
from magnetar.client import exceptions

B64 = base64.b64encode(b"x").decode()


def _post(cluster, path: str, **kwargs) -> httpx.Response:  # type: ignore[no-untyped-def]
    return HTTP.post(f"{cluster.url}{path}", timeout=30, **kwargs)


def _assert_refused(response: httpx.Response, status: int, text: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert text in body["reason"], body


@pytest.mark.parametrize(
    ("body", "status", "reason"),
    [
        (b"{not json", 400, "not valid JSON"),
        (b'{"messages": []}', 400, "messages"),
        (b'{"messages": [{"payload": "!!notbase64"}]}', 400, "base64"),
        (b'{"messages": [{"payload": "eA==", "nullValue": true}]}', 400, "null value"),
        (b'{"messages": [{"payload": "eA==", "surprise": 1}]}', 400, "surprise"),
        (b'[1, 2]', 400, "Invalid request body"),
    ],
)
def test_malformed_produce_requests_are_refused(cluster, body: bytes, status: int, reason: str) -> None:  # type: ignore[no-untyped-def]
    response = _post(cluster, "/topics/persistent/public/default/bad-input", content=body,
                     headers={"content-type": "application/json"})
    _assert_refused(response, status, reason)
    topics = HTTP.get(f"{cluster.url}/admin/v2/persistent/public/default").json()
    assert "persistent://public/default/bad-input" not in topics, "nothing half-written"


def test_oversized_payload_is_refused_with_413_and_writes_nothing(cluster) -> None:  # type: ignore[no-untyped-def]
    big = base64.b64encode(b"x" * (1024 * 1024 + 1)).decode()
    response = _post(cluster, "/topics/persistent/public/default/too-big", json={"messages": [{"payload": big}]})
    _assert_refused(response, 413, "exceeds the journal record limit")
    topics = HTTP.get(f"{cluster.url}/admin/v2/persistent/public/default").json()
    assert "persistent://public/default/too-big" not in topics


@pytest.mark.parametrize(
    ("path", "status", "reason"),
    [
        ("/topics/persistent/public/no-such-ns/t", 404, "Namespace public/no-such-ns does not exist"),
        ("/topics/persistent/no$tenant/default/t", 400, "Invalid tenant name"),
        ("/topics/persistent/public/default/with%20space", 400, "Invalid topic name"),
    ],
)
def test_bad_topic_names_are_refused(cluster, path: str, status: int, reason: str) -> None:  # type: ignore[no-untyped-def]
    _assert_refused(_post(cluster, path, json={"messages": [{"payload": B64}]}), status, reason)


def test_unknown_subscription_and_consumer_are_404(cluster, topic: str) -> None:  # type: ignore[no-untyped-def]
    name = topic.split("://")[1]
    _post(cluster, f"/topics/persistent/{name}", json={"messages": [{"payload": B64}]})
    response = _post(cluster, f"/magnetar/v1/consumer/persistent/{name}/nobody/c1/receive", json={})
    _assert_refused(response, 404, "Subscription nobody not found")
    response = _post(cluster, f"/magnetar/v1/consumer/persistent/{name}/nobody/c1/ack", json={"messageIds": ["0:0"]})
    _assert_refused(response, 404, "not found")
    _assert_refused(_post(cluster, "/no/such/path", json={}), 404, "No such endpoint: POST /no/such/path")


def test_bad_subscribe_and_ack_bodies(cluster, topic: str) -> None:  # type: ignore[no-untyped-def]
    name = topic.split("://")[1]
    base = f"{cluster.url}/magnetar/v1/consumer/persistent/{name}/s"
    r = HTTP.put(f"{base}/c1", json={"subscriptionType": "Sometimes"})
    _assert_refused(r, 400, "subscriptionType")
    r = HTTP.put(f"{base}/c1", json={"subscriptionType": "Shared", "initialPosition": "Earliest"})
    assert r.status_code == 200
    _assert_refused(_post(cluster, f"/magnetar/v1/consumer/persistent/{name}/s/c1/ack", json={"messageIds": ["x:y"]}),
                    400, "Invalid message id")
    _assert_refused(_post(cluster, f"/magnetar/v1/consumer/persistent/{name}/s/c1/ack", json={"cumulative": "0:0"}),
                    405, "Cumulative acknowledgement is not allowed")
    _assert_refused(_post(cluster, f"/magnetar/v1/consumer/persistent/{name}/s/c1/receive", json={"waitMs": 99_999}),
                    400, "waitMs")


def test_admin_refusals(cluster) -> None:  # type: ignore[no-untyped-def]
    _assert_refused(HTTP.put(f"{cluster.url}/admin/v2/tenants/public", json={}), 409, "already exists")
    _assert_refused(HTTP.get(f"{cluster.url}/admin/v2/namespaces/ghost"), 404, "Tenant ghost does not exist")
    _assert_refused(HTTP.put(f"{cluster.url}/admin/v2/namespaces/ghost/ns"), 404, "Tenant ghost does not exist")
    _assert_refused(HTTP.put(f"{cluster.url}/admin/v2/tenants/t1", content=b"[1]"), 400, "Input should be an object")


def test_sdk_raises_clear_exceptions(client: magnetar.Client) -> None:
    with pytest.raises(exceptions.InvalidConfiguration):
        client.create_producer("persistent://only/two")
    with pytest.raises(exceptions.TopicNotFound) as info:  # as Pulsar: refused when the producer is created
        client.create_producer("persistent://public/missing-ns/t")
    assert "missing-ns" in info.value.reason
    with pytest.raises(exceptions.MessageTooBig):
        client.create_producer("sdk-too-big").send(b"x" * (1024 * 1024 + 10))


def test_a_sequence_id_that_overflows_with_the_batch_is_refused(cluster) -> None:  # type: ignore[no-untyped-def]
    body = {"sequenceId": 2**63 - 1, "messages": [{"payload": "aGk="}, {"payload": "aGk="}]}
    response = HTTP.post(f"{cluster.url}/topics/persistent/public/default/overflow-seq", json=body)
    assert response.status_code == 400 and "64-bit" in response.json()["reason"]
