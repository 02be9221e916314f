"""Typed topics through Pulsar's REST producer (keySchema / valueSchema / schemaVersion, values as
text) and the WebSocket API (schemaVersion on produced and pushed messages), read back by typed
SDK readers."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import pytest

import magnetar
from http_helpers import HTTP
from magnetar.client.admin import AdminClient
from magnetar.schema import (
    AvroSchema,
    BooleanSchema,
    DoubleSchema,
    Int32Schema,
    Int64Schema,
    JsonSchema,
    KeyValueEncodingType,
    KeyValueSchema,
    Record,
    Schema,
    String,
    StringSchema,
)
from ws_helpers import open_ws, receive, topic_path


class City(Record):
    name = String(required=True)
    country = String()


def rest_path(topic: str) -> str:
    return "/topics/" + topic.replace("://", "/")


def schema_json(schema: Schema) -> str:
    return json.dumps(schema.schema_info().payload())


def read_one(client: magnetar.Client, topic: str, schema: Schema) -> magnetar.Message:
    return client.create_reader(topic, magnetar.MessageId.earliest, schema=schema).read_next(10_000)


@pytest.mark.parametrize(("schema", "text", "value"), [
    (StringSchema(), "grüezi", "grüezi"), (Int32Schema(), "-12", -12), (Int64Schema(), "4611686018427387904", 2**62),
    (DoubleSchema(), "2.5", 2.5), (BooleanSchema(), "true", True),
    (AvroSchema(City), '{"name": "Lyon", "country": "FR"}', City(name="Lyon", country="FR")),
    (JsonSchema(City), '{"name": "Bern", "country": "CH"}', City(name="Bern", country="CH")),
], ids=lambda v: type(v).__name__ if isinstance(v, Schema) else None)
def test_rest_producer_typed_values(cluster, client: magnetar.Client, admin: AdminClient, schema: Schema, text: str,
                                    value: Any) -> None:  # type: ignore[no-untyped-def]
    topic = f"persistent://public/default/rest-{uuid.uuid4().hex[:8]}"
    body = {"valueSchema": schema_json(schema), "messages": [{"payload": text, "key": "k"}]}
    response = HTTP.post(cluster.url + rest_path(topic), json=body)
    assert response.status_code == 200, response.text
    message = read_one(client, topic, schema)
    assert message.value() == value and message.int_schema_version() == 0
    assert admin.get_schema(topic)["type"] == schema.schema_info().schema_type()
    again = HTTP.post(cluster.url + rest_path(topic), json={"schemaVersion": 0, "messages": [{"payload": text}]})
    assert again.status_code == 200, again.text  # by version, without the schema


def test_rest_producer_key_value_and_refusals(cluster, client: magnetar.Client) -> None:  # type: ignore[no-untyped-def]
    topic = f"persistent://public/default/rest-kv-{uuid.uuid4().hex[:8]}"
    kv = KeyValueSchema(Int64Schema(), JsonSchema(City), KeyValueEncodingType.SEPARATED)
    body = {"keySchema": schema_json(Int64Schema()), "valueSchema": schema_json(JsonSchema(City)),
            "messages": [{"key": "7", "payload": '{"name": "Oslo", "country": "NO"}'}]}
    response = HTTP.post(cluster.url + rest_path(topic), json=body)
    assert response.status_code == 200, response.text
    assert read_one(client, topic, kv).value() == (7, City(name="Oslo", country="NO"))
    # a value the schema cannot encode, an unknown version, a schema the strategy refuses
    bad_value = HTTP.post(cluster.url + rest_path(topic), json={**body, "messages": [{"key": "x", "payload": '{"name": "A"}'}]})
    assert bad_value.status_code == 400 and "INT64" in bad_value.json()["reason"]
    unknown = HTTP.post(cluster.url + rest_path(topic), json={"schemaVersion": 9, "messages": [{"payload": "x"}]})
    assert unknown.status_code == 404 and unknown.json()["reason"]
    other = HTTP.post(cluster.url + rest_path(topic), json={"valueSchema": schema_json(StringSchema()),
                                                             "messages": [{"payload": "x"}]})
    assert other.status_code == 409 and other.json()["reason"].startswith("Incompatible schema")
    not_a_schema = HTTP.post(cluster.url + rest_path(topic), json={"valueSchema": "{nope", "messages": [{"payload": "x"}]})
    assert not_a_schema.status_code == 400


def test_websocket_carries_schema_versions(cluster, client: magnetar.Client) -> None:  # type: ignore[no-untyped-def]
    topic = f"persistent://public/default/ws-typed-{uuid.uuid4().hex[:8]}"
    producer = client.create_producer(topic, schema=AvroSchema(City))  # registers version 0
    producer.send(City(name="Turin"))
    encoded = AvroSchema(City).encode(City(name="Porto", country="PT"))
    with open_ws(cluster, f"/ws/v2/consumer/{topic_path(topic)}/ws-sub?subscriptionType=Exclusive") as consumer, \
            open_ws(cluster, f"/ws/v2/producer/{topic_path(topic)}") as ws_producer:
        ws_producer.send(json.dumps({"payload": base64.b64encode(encoded).decode(), "schemaVersion": 0}))
        assert json.loads(ws_producer.recv(timeout=10))["result"] == "ok"
        ws_producer.send(json.dumps({"payload": base64.b64encode(b"x").decode(), "schemaVersion": "zero"}))
        assert json.loads(ws_producer.recv(timeout=10))["result"].startswith("send-error")
        pushed = receive(consumer, 1)
    assert pushed[0]["schemaVersion"] == 0
    reader = client.create_reader(topic, magnetar.MessageId.earliest, schema=AvroSchema(City))
    values = [reader.read_next(10_000).value() for _ in range(2)]
    assert City(name="Porto", country="PT") in values and City(name="Turin") in values


def test_websocket_publishes_are_checked_against_the_registry(cluster, client: magnetar.Client,
                                                               admin: AdminClient) -> None:  # type: ignore[no-untyped-def]
    namespace = f"public/ws-enf-{uuid.uuid4().hex[:8]}"
    admin.create_namespace(namespace)
    topic = f"persistent://{namespace}/typed"
    client.create_producer(topic, schema=StringSchema()).send("v0")

    def publish(ws: Any, **fields: Any) -> dict[str, Any]:
        ws.send(json.dumps({"payload": base64.b64encode(b"raw").decode(), **fields}))
        answer: dict[str, Any] = json.loads(ws.recv(timeout=10))
        return answer

    with open_ws(cluster, f"/ws/v2/producer/{topic_path(topic)}") as ws:
        assert publish(ws, schemaVersion=0)["result"] == "ok"
        unknown = publish(ws, schemaVersion=5)
        assert unknown["result"].startswith("send-error") and "version 5" in unknown["errorMsg"]
        assert publish(ws)["result"] == "ok"  # without a schema: accepted while not enforced
        assert HTTP.post(f"{cluster.url}/admin/v2/namespaces/{namespace}/schemaValidationEnforced",
                          json=True).status_code == 204
        refused = publish(ws)
        assert refused["result"].startswith("send-error") and "schemaValidationEnforced" in refused["errorMsg"]
        assert publish(ws, schemaVersion=0)["result"] == "ok"
