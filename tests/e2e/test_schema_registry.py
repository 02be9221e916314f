"""The schema registry through the HTTP API (Pulsar's admin paths and bodies) and the CLI:
versions, the namespace's strategy, compatibility tests, deletes, bad schemas refused with a
reason and nothing stored, the schema items in DynamoDB."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from http_helpers import HTTP
from magnetar.adapters.aws.dynamodb import DynamoMetadataStore
from magnetar.cli.main import app as cli
from magnetar.client import exceptions
from magnetar.client.admin import AdminClient


def user(*extra: dict[str, object]) -> str:
    return json.dumps({"type": "record", "name": "User", "namespace": "example",
                       "fields": [{"name": "name", "type": "string"}, *extra]})


V1 = user()
V2 = user({"name": "age", "type": "int", "default": 0})  # compatible both ways
REQUIRED = user({"name": "email", "type": "string"})  # old data lacks it: not BACKWARD


@pytest.fixture
def namespace(admin: AdminClient) -> str:
    name = f"public/sch-{uuid.uuid4().hex[:8]}"
    admin.create_namespace(name)
    return name


def schema_path(topic: str, suffix: str) -> str:
    return "/admin/v2/schemas/" + topic.split("://", 1)[1] + "/" + suffix


def test_versions_strategy_and_delete_on_pulsars_paths(cluster, admin: AdminClient, namespace: str) -> None:  # type: ignore[no-untyped-def]
    topic = f"persistent://{namespace}/users"
    url = cluster.url
    posted = HTTP.post(url + schema_path(topic, "schema"), json={"type": "AVRO", "schema": V1, "properties": {"a": "b"}})
    assert posted.status_code == 202 and posted.json() == {"version": {"version": 0}}
    got = HTTP.get(url + schema_path(topic, "schema")).json()
    assert (got["version"], got["type"], json.loads(got["data"]), got["properties"]) == (0, "AVRO", json.loads(V1), {"a": "b"})
    # Pulsar's default strategy is FULL: a required new field is refused, a defaulted one accepted
    assert admin.get_schema_compatibility_strategy(namespace) == "UNDEFINED"
    verdict = admin.test_schema_compatibility(topic, "AVRO", REQUIRED)
    assert verdict["isCompatible"] is False and verdict["schemaCompatibilityStrategy"] == "FULL"
    with pytest.raises(exceptions.IncompatibleSchema, match="Incompatible schema"):
        admin.upload_schema(topic, "AVRO", REQUIRED)
    assert admin.upload_schema(topic, "AVRO", V2) == 1
    assert admin.upload_schema(topic, "AVRO", json.dumps(json.loads(V2), indent=1)) == 1  # identical: same version
    # FORWARD accepts the required field (old readers ignore it)
    admin.set_schema_compatibility_strategy(namespace, "FORWARD")
    assert admin.get_schema_compatibility_strategy(namespace) == "FORWARD"
    assert admin.test_schema_compatibility(topic, "AVRO", REQUIRED)["isCompatible"] is True
    assert admin.upload_schema(topic, "AVRO", REQUIRED) == 2
    assert [s["version"] for s in admin.get_all_schemas(topic)] == [0, 1, 2]
    assert json.loads(admin.get_schema(topic, 1)["data"]) == json.loads(V2)
    by_schema = HTTP.post(url + schema_path(topic, "version"), json={"type": "AVRO", "schema": V2})
    assert by_schema.json() == {"version": 1}
    # the items sit in the metadata table under the topic's schema id
    stored = DynamoMetadataStore(cluster.names.table).get_schemas(topic.split("://", 1)[1])
    assert [s.version for s in stored] == [0, 1, 2]
    # delete: no schema, then a new history that any schema may start
    assert admin.delete_schema(topic) == 3
    missing = HTTP.get(url + schema_path(topic, "schema"))
    assert missing.status_code == 404 and "reason" in missing.json()
    assert admin.upload_schema(topic, "STRING") == 4
    assert json.loads(admin.get_schema(topic, 1)["data"]) == json.loads(V2)  # kept for old messages


def test_always_incompatible_and_type_changes(admin: AdminClient, namespace: str) -> None:
    topic = f"persistent://{namespace}/typed"
    assert admin.upload_schema(topic, "INT32") == 0
    with pytest.raises(exceptions.IncompatibleSchema):
        admin.upload_schema(topic, "STRING")  # another type, under FULL
    admin.set_schema_compatibility_strategy(namespace, "ALWAYS_COMPATIBLE")
    assert admin.upload_schema(topic, "STRING") == 1
    admin.set_schema_compatibility_strategy(namespace, "ALWAYS_INCOMPATIBLE")
    with pytest.raises(exceptions.IncompatibleSchema):
        admin.upload_schema(topic, "INT64")
    assert admin.upload_schema(topic, "STRING") == 1  # the same schema is no change


@pytest.mark.parametrize("payload", [
    {"type": "AVRO", "schema": "{not json"},
    {"type": "AVRO", "schema": json.dumps({"type": "record", "name": "X", "fields": [{"name": "a", "type": "nope"}]})},
    {"type": "JSON", "schema": ""},
    {"type": "AVRO_TYPO", "schema": V1},
    {"type": "KEY_VALUE", "schema": "{\"key\": \"\", \"value\": \"{bad\"}",
     "properties": {"key.schema.type": "STRING", "value.schema.type": "AVRO"}},
    {"schema": V1},
])
def test_bad_schemas_are_400_with_a_reason_and_nothing_stored(cluster, namespace: str, payload: dict) -> None:  # type: ignore[no-untyped-def,type-arg]
    topic = f"persistent://{namespace}/bad"
    response = HTTP.post(cluster.url + schema_path(topic, "schema"), json=payload)
    assert response.status_code == 400, response.text
    assert response.json()["reason"]
    assert HTTP.get(cluster.url + schema_path(topic, "schemas")).json() == {"getSchemaResponses": []}


def test_namespace_schema_policies(cluster, admin: AdminClient, namespace: str) -> None:  # type: ignore[no-untyped-def]
    base = f"{cluster.url}/admin/v2/namespaces/{namespace}"
    assert HTTP.get(f"{base}/isAllowAutoUpdateSchema").json() is True
    assert HTTP.get(f"{base}/schemaValidationEnforced").json() is False
    assert HTTP.post(f"{base}/schemaValidationEnforced", json=True).status_code == 204
    assert HTTP.get(f"{base}/schemaValidationEnforced").json() is True
    assert HTTP.post(f"{base}/isAllowAutoUpdateSchema", json="yes").status_code == 400
    bad = HTTP.put(f"{base}/schemaCompatibilityStrategy", json="SIDEWAYS")
    assert bad.status_code == 400 and "SIDEWAYS" in bad.json()["reason"]


def test_cli_schemas_get_upload_compatibility_delete(cluster, namespace: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    topic = f"persistent://{namespace}/cli"
    runner = CliRunner()
    url = ["--service-url", cluster.url]
    first, breaking = tmp_path / "v1.json", tmp_path / "breaking.json"
    first.write_text(json.dumps({"type": "AVRO", "schema": V1, "properties": {}}))
    breaking.write_text(json.dumps({"type": "AVRO", "schema": json.loads(REQUIRED)}))  # an object is taken too
    result = runner.invoke(cli, ["admin", "schemas", "upload", topic, "--filename", str(first), *url])
    assert result.exit_code == 0 and "version 0" in result.output, result.output
    result = runner.invoke(cli, ["admin", "schemas", "get", topic, *url])
    assert result.exit_code == 0 and '"type": "AVRO"' in result.output, result.output
    result = runner.invoke(cli, ["admin", "schemas", "compatibility", topic, "--filename", str(breaking), *url])
    assert result.exit_code == 1 and '"isCompatible": false' in result.output, result.output
    result = runner.invoke(cli, ["admin", "schemas", "upload", topic, "--filename", str(breaking), *url])
    assert result.exit_code != 0 and "Incompatible schema" in result.output, result.output
    result = runner.invoke(cli, ["admin", "schemas", "delete", topic, *url])
    assert result.exit_code == 0 and "version 1" in result.output, result.output


def test_concurrent_registrations_get_one_version_each(cluster) -> None:  # type: ignore[no-untyped-def]
    """`magnetar verify`'s schema check (verify/schemas.py) on its own: 12 registrations at once."""
    from magnetar.verify import schemas
    from magnetar.verify.history import History

    history = History()
    topic = f"persistent://public/default/race-{uuid.uuid4().hex[:8]}"
    started = schemas.start(cluster.url, None, topic, history)
    schemas.check(cluster.url, None, started, history)
    assert history.schema_violations == []
    stored = HTTP.get(cluster.url + schema_path(started[0], "schemas")).json()["getSchemaResponses"]
    assert len(stored) == schemas.REGISTRANTS * schemas.SCHEMAS_EACH
    # the check sees a wrong answer: a registration "answered" with another schema's version
    started[1][1].append((json.dumps({"type": "record", "name": "X", "fields": []}), 0, ""))
    schemas.check(cluster.url, None, started, history)
    assert any("does not hold" in p for p in history.schema_violations)
