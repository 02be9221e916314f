"""The schema registry on Pulsar's admin paths (`/admin/v2/schemas/{tenant}/{ns}/{topic}/...`),
the namespace's schema policies, and the SDK's registration of a producer's or consumer's schema
(Pulsar's binary protocol does it when a producer or consumer connects; here a route each).

Access as in Pulsar: reading a schema needs produce or consume on the topic (GET_METADATA);
posting, deleting and testing one is the tenant admin's; the SDK's registration needs produce
(producers) or consume (consumers), as the binary protocol's connection does.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from pydantic import BaseModel, ConfigDict, Field

from magnetar.adapters.aws import build_broker
from magnetar.api.access import guarded
from magnetar.api.http import (
    DOMAINS,
    body,
    has_body,
    json_body,
    json_response,
    namespace_name,
    no_content,
    topic_name,
)
from magnetar.api.models import ProduceRequest, decode_b64
from magnetar.core.authz import Access
from magnetar.core.compression import Codec, decompress
from magnetar.core.entry import decode_messages
from magnetar.core.errors import InvalidInput
from magnetar.core.naming import NamespaceName, TopicName
from magnetar.core.schema import SchemaData, parse_schema
from magnetar.core.schema.compatibility import STRATEGIES, UNDEFINED, check_strategy
from magnetar.core.schema.registry import (
    AUTO_UPDATE,
    STRATEGY,
    VALIDATION_ENFORCED,
    IncompatibleSchema,
    SchemaPolicy,
)
from magnetar.core.schema.values import encode_text

router = Router()  # type: ignore[no-untyped-call]
SCHEMAS = "/admin/v2/schemas/<tenant>/<namespace>/<topic>"
NS = "/admin/v2/namespaces/<tenant>/<namespace>"


class PostSchemaPayload(BaseModel):
    """Pulsar's PostSchemaPayload: the type, the definition as text, properties."""

    type: str = Field(min_length=1, max_length=32)
    schema_: str = Field(default="", alias="schema", max_length=256 * 1024)
    properties: dict[str, str] = Field(default_factory=dict)


class ClientSchemaPayload(BaseModel):
    """A producer's or consumer's schema (no type: the producer has no schema)."""

    type: str | None = Field(default=None, max_length=32)
    schema_: str = Field(default="", alias="schema", max_length=256 * 1024)
    properties: dict[str, str] = Field(default_factory=dict)


_SCHEMA_RESPONSE = {"type": "object", "properties": {
    "version": {"type": "integer"}, "type": {"type": "string"}, "timestamp": {"type": "integer"},
    "data": {"type": "string"}, "properties": {"type": "object", "additionalProperties": {"type": "string"}}}}
_ALL = {"type": "object", "properties": {"getSchemaResponses": {"type": "array", "items": _SCHEMA_RESPONSE}}}
_VERSION = {"type": "object", "properties": {"version": {"type": "integer"}}}
_POSTED = {"type": "object", "properties": {"version": _VERSION}}
_COMPATIBILITY = {"type": "object", "properties": {"isCompatible": {"type": "boolean"},
                                                   "schemaCompatibilityStrategy": {"type": "string"}}}
_CLIENT = {"type": "object", "properties": {"version": {"type": ["integer", "null"]}}}
_STRATEGY = {"type": "string", "enum": [*STRATEGIES, UNDEFINED]}


def _topic(tenant: str, namespace: str, topic: str) -> TopicName:
    return topic_name("persistent", tenant, namespace, topic)


def _payload() -> SchemaData:
    request = body(PostSchemaPayload)
    return parse_schema(request.type, request.schema_, request.properties)


def _policy(namespace: NamespaceName) -> SchemaPolicy:
    return SchemaPolicy.of(build_broker().admin.get_namespace(namespace).policies)


@guarded(router, "GET", f"{SCHEMAS}/schema", Access.LOOKUP, "persistent", response=_SCHEMA_RESPONSE)
def get_schema(tenant: str, namespace: str, topic: str) -> Response[str]:
    """The topic's latest schema."""
    return json_response(build_broker().schemas.latest(_topic(tenant, namespace, topic)).response())


@guarded(router, "GET", f"{SCHEMAS}/schema/<version>", Access.LOOKUP, "persistent", response=_SCHEMA_RESPONSE)
def get_schema_version(tenant: str, namespace: str, topic: str, version: str) -> Response[str]:
    """One version of the topic's schema."""
    if not version.isdigit():
        raise InvalidInput(f"Invalid schema version {version!r}: a non-negative integer")
    return json_response(build_broker().schemas.version(_topic(tenant, namespace, topic), int(version)).response())


@guarded(router, "GET", f"{SCHEMAS}/schemas", Access.LOOKUP, "persistent", response=_ALL)
def get_all_schemas(tenant: str, namespace: str, topic: str) -> Response[str]:
    """Every version of the topic's schema since its last delete."""
    versions = build_broker().schemas.current(_topic(tenant, namespace, topic))
    return json_response({"getSchemaResponses": [s.response() for s in versions]})


@guarded(router, "POST", f"{SCHEMAS}/version", Access.LOOKUP, "persistent", request=PostSchemaPayload,
         response=_VERSION)
def get_version_by_schema(tenant: str, namespace: str, topic: str) -> Response[str]:
    """The version of the topic's schema identical to the one given."""
    return json_response({"version": build_broker().schemas.version_of(_topic(tenant, namespace, topic), _payload())})


@guarded(router, "POST", f"{SCHEMAS}/schema", Access.TENANT_ADMIN, "persistent", request=PostSchemaPayload,
         response=_POSTED, errors=(409,))
def post_schema(tenant: str, namespace: str, topic: str) -> Response[str]:
    """Upload a schema: a new version if the namespace's strategy accepts it (409 otherwise), the
    existing version when it is identical to one."""
    name = _topic(tenant, namespace, topic)
    schema = _payload()
    version = build_broker().schemas.put(name, schema, _policy(name.namespace_name).strategy)
    return json_response({"version": {"version": version}}, 202)


@guarded(router, "DELETE", f"{SCHEMAS}/schema", Access.TENANT_ADMIN, "persistent", response=_VERSION)
def delete_schema(tenant: str, namespace: str, topic: str) -> Response[str]:
    """Delete the topic's schema (its versions stay readable by number)."""
    return json_response({"version": build_broker().schemas.delete(_topic(tenant, namespace, topic))})


@guarded(router, "POST", f"{SCHEMAS}/compatibility", Access.TENANT_ADMIN, "persistent", request=PostSchemaPayload,
         response=_COMPATIBILITY)
def test_compatibility(tenant: str, namespace: str, topic: str) -> Response[str]:
    """Would the topic accept this schema under its namespace's strategy?"""
    name = _topic(tenant, namespace, topic)
    schema = _payload()
    strategy = _policy(name.namespace_name).strategy
    why = build_broker().schemas.compatibility(name, schema, strategy)
    answer: dict[str, Any] = {"isCompatible": why is None, "schemaCompatibilityStrategy": strategy}
    if why:
        answer["reason"] = why
    return json_response(answer)


# --- namespace policies ------------------------------------------------------------------------
@guarded(router, "PUT", f"{NS}/schemaCompatibilityStrategy", Access.TENANT_ADMIN, request=_STRATEGY)
def set_strategy(tenant: str, namespace: str) -> Response[str]:
    """Set the namespace's schema compatibility strategy (body: a JSON string)."""
    build_broker().admin.set_policy(namespace_name(tenant, namespace), STRATEGY, check_strategy(json_body()))
    return no_content()


@guarded(router, "GET", f"{NS}/schemaCompatibilityStrategy", Access.TENANT_ADMIN, response=_STRATEGY)
def get_strategy(tenant: str, namespace: str) -> Response[str]:
    """The namespace's strategy as set (UNDEFINED: the broker's default, FULL, applies)."""
    value = build_broker().admin.policy(namespace_name(tenant, namespace), STRATEGY)
    return json_response(value if value in STRATEGIES else UNDEFINED)


def _flag_routes(path: str, field: str, default: bool, what: str) -> None:
    def set_flag(tenant: str, namespace: str) -> Response[str]:
        value = json_body()
        if not isinstance(value, bool):
            raise InvalidInput("Request body must be true or false")
        build_broker().admin.set_policy(namespace_name(tenant, namespace), field, value)
        return no_content()

    def get_flag(tenant: str, namespace: str) -> Response[str]:
        value = build_broker().admin.policy(namespace_name(tenant, namespace), field)
        return json_response(default if value is None else bool(value))

    guarded(router, "POST", f"{NS}/{path}", Access.TENANT_ADMIN, request={"type": "boolean"},
            summary=f"Set the namespace's {what}")(set_flag)
    guarded(router, "GET", f"{NS}/{path}", Access.TENANT_ADMIN, response={"type": "boolean"},
            summary=f"The namespace's {what}")(get_flag)


_flag_routes("isAllowAutoUpdateSchema", AUTO_UPDATE, True, "isAllowAutoUpdateSchema (producers may add versions)")
_flag_routes("schemaValidationEnforced", VALIDATION_ENFORCED, False,
             "schemaValidationEnforced (producers without a schema refused on topics with one)")


# --- the SDK: a producer's or consumer's schema when it connects --------------------------------
def _client_schema() -> SchemaData | None:
    request = body(ClientSchemaPayload)
    if request.type is None:
        return None
    return parse_schema(request.type, request.schema_, request.properties)


def _bind_client(domain: str) -> None:
    path = f"/magnetar/v1/schema/{domain}/<tenant>/<namespace>/<topic>"

    def producer_schema(tenant: str, namespace: str, topic: str) -> Response[str]:
        name = topic_name(domain, tenant, namespace, topic)
        schema = _client_schema()
        version = build_broker().schemas.for_producer(name, schema, _policy(name.namespace_name))
        return json_response({"version": version})

    def consumer_schema(tenant: str, namespace: str, topic: str) -> Response[str]:
        name = topic_name(domain, tenant, namespace, topic)
        schema = _client_schema()
        version = None if schema is None else build_broker().schemas.for_consumer(
            name, schema, _policy(name.namespace_name))
        return json_response({"version": version})

    guarded(router, "POST", f"{path}/producer", Access.PRODUCE, domain, request=ClientSchemaPayload,
            response=_CLIENT, errors=(409,),
            summary="Register a producer's schema (the version it writes with; 409 when refused)")(producer_schema)
    guarded(router, "POST", f"{path}/consumer", Access.CONSUME, domain, request=ClientSchemaPayload,
            response=_CLIENT, errors=(409,),
            summary="Check a consumer's or reader's schema against the topic's (409 when it cannot read it)")(
        consumer_schema)


for _domain in DOMAINS:
    _bind_client(_domain)


# --- the broker's check on publish (schemaValidationEnforced) ------------------------------------
def refuse_untyped_publish(name: TopicName, request: ProduceRequest) -> None:
    """With the namespace's schemaValidationEnforced and a schema on the topic, a publish whose
    messages carry no schema version (a producer without a schema) is refused (409,
    IncompatibleSchema), as Pulsar refuses such a producer. Costs nothing unless enforced (the
    policies are cached; whether the topic has a schema is cached for 10 s). The REST producer's
    messages are typed by the request's `schemaVersion` or `valueSchema`."""
    broker = build_broker()
    if not broker.writer.policies(name).get(VALIDATION_ENFORCED) or not broker.schemas.cached_current(name):
        return
    if request.messages is not None:
        typed = request.schemaVersion >= 0
    else:
        batches = request.batches if request.batches is not None else [request.batch] if request.batch else []
        typed = all(b.chunk is not None or all(m.schema_version is not None for m in decode_messages(
            decompress(Codec.parse(b.compression), decode_b64(b.payload), b.uncompressedSize))) for b in batches)
    if not typed:
        raise IncompatibleSchema("Producers cannot connect or send messages without a schema to topics with a "
                                 "schema when schemaValidationEnforced is set")


# --- the REST producer's typed messages (Pulsar's ProducerMessages: keySchema, valueSchema, schemaVersion)
def _schema_field(text: str, what: str) -> SchemaData:
    """A SchemaInfo as JSON text (`{"type", "schema", "properties"}`), or base64 of it."""
    try:
        info = json.loads(text)
    except ValueError:
        try:
            info = json.loads(base64.b64decode(text, validate=True))
        except (ValueError, binascii.Error):
            raise InvalidInput(f"{what} must be a schema as JSON: {{\"type\", \"schema\", \"properties\"}}") from None
    if not isinstance(info, dict):
        raise InvalidInput(f"{what} must be a JSON object with type, schema and properties")
    definition = info.get("schema", "")
    if not isinstance(definition, str):
        definition = json.dumps(definition)
    return parse_schema(info.get("type"), definition, info.get("properties"))


def _key_value(key: SchemaData, value: SchemaData) -> SchemaData:
    def part(s: SchemaData) -> Any:
        return json.loads(s.data) if s.data else ""

    return parse_schema("KEY_VALUE", json.dumps({"key": part(key), "value": part(value)}), {
        "key.schema.type": key.type, "value.schema.type": value.type, "kv.encoding.type": "SEPARATED"})


class _TypedMessage(BaseModel):
    """A typed REST message before encoding: `payload` is the value as text."""

    model_config = ConfigDict(extra="allow")
    payload: str | None = None
    key: str | None = None
    nullValue: bool = False


def produce_request(name: TopicName) -> ProduceRequest:
    """The produce body. With `valueSchema` (and `keySchema`) or `schemaVersion` (Pulsar's
    ProducerMessages), the REST producer's messages are typed: the schema is registered or checked
    as a producer's (IncompatibleSchema when refused) and each `payload` is the value as text,
    encoded here with the schema (a KEY_VALUE's key: the `key` as text, encoded with the key
    schema); the request then carries base64 payloads and its `schemaVersion`."""
    raw = json_body() if has_body() else {}
    typed = isinstance(raw, dict) and isinstance(raw.get("messages"), list) and (
        raw.get("valueSchema") is not None or raw.get("keySchema") is not None
        or (isinstance(raw.get("schemaVersion"), int) and raw["schemaVersion"] >= 0))
    if not typed:
        return body(ProduceRequest)
    key_text, value_text = raw.get("keySchema"), raw.get("valueSchema")
    if not isinstance(key_text, str | None) or not isinstance(value_text, str | None):
        raise InvalidInput("keySchema and valueSchema must be strings (a schema as JSON)")
    requested = raw.get("schemaVersion", -1)
    if not isinstance(requested, int) or isinstance(requested, bool) or requested < -1:
        raise InvalidInput("schemaVersion must be a non-negative integer (or -1)")
    broker = build_broker()
    if key_text is not None or value_text is not None:
        value = _schema_field(value_text, "valueSchema") if value_text else SchemaData("BYTES")
        schema = _key_value(_schema_field(key_text, "keySchema"), value) if key_text else value
        version = broker.schemas.for_producer(name, schema, _policy(name.namespace_name))
        if version is None:  # BYTES on a topic without schema: an untyped publish
            return ProduceRequest.model_validate({k: v for k, v in raw.items() if k not in ("keySchema", "valueSchema")})
        if requested >= 0 and requested != version:
            raise InvalidInput(f"schemaVersion {requested} is not the version of the schema given ({version})")
    else:
        version = requested
        schema = broker.schemas.version(name, version).schema
    key_schema, value_schema = schema.key_value() if schema.type == "KEY_VALUE" else (None, schema)
    messages = []
    for item in raw["messages"]:
        m = _TypedMessage.model_validate(item)
        out = dict(item)
        if not (m.nullValue or ("payload" in item and m.payload is None)):
            out["payload"] = base64.b64encode(encode_text(value_schema, m.payload or "")).decode("ascii")
        if key_schema is not None and m.key is not None and key_schema.type != "STRING":
            out["key"] = base64.b64encode(encode_text(key_schema, m.key)).decode("ascii")
        messages.append(out)
    return ProduceRequest.model_validate({**{k: v for k, v in raw.items() if k not in ("keySchema", "valueSchema")},
                                          "messages": messages, "schemaVersion": version})
