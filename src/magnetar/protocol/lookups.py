"""Requests about topics rather than a producer or consumer: LOOKUP (answered proxy-style),
PARTITIONED_METADATA, GET_TOPICS_OF_NAMESPACE, GET_SCHEMA and GET_OR_CREATE_SCHEMA."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from magnetar.core.authz import Access, Target
from magnetar.core.errors import InvalidInput, MagnetarError
from magnetar.core.naming import NamespaceName, TopicName
from magnetar.protocol import pulsar_api_pb2 as pb
from magnetar.protocol.errors import server_error
from magnetar.protocol.frames import Type, command
from magnetar.protocol.schemas import get_or_create, to_wire, version_bytes, version_of
from magnetar.protocol.schemas import get_schema as read_schema

if TYPE_CHECKING:
    from magnetar.protocol.connection import Connection


def lookup(conn: Connection, request: Any) -> None:
    """LOOKUP, proxy-style: the topic is served here, through the address the client connected to."""
    try:
        TopicName.parse(request.topic)
    except MagnetarError as exc:
        conn.send(command(Type.LOOKUP_RESPONSE, lookupTopicResponse={
            "request_id": request.request_id, "response": pb.CommandLookupTopicResponse.Failed,
            "error": pb.InvalidTopicName, "message": exc.reason}))
        return
    response = {"request_id": request.request_id, "response": pb.CommandLookupTopicResponse.Connect,
                "brokerServiceUrl": conn.server.service_url, "authoritative": True, "proxy_through_service_url": True}
    if conn.server.tls_service_url is not None:
        response["brokerServiceUrlTls"] = conn.server.tls_service_url
    conn.send(command(Type.LOOKUP_RESPONSE, lookupTopicResponse=response))


async def partitions(conn: Connection, request: Any) -> None:
    """PARTITIONED_METADATA: the partition count, 0 for a plain topic."""
    try:
        topic = TopicName.parse(request.topic)
        await conn.authorize(Access.LOOKUP, topic)
        count = await conn.call(conn.broker.metadata.get_partitions, topic)
    except Exception as exc:
        code, message = server_error(exc)
        if isinstance(exc, InvalidInput):
            code = pb.InvalidTopicName
        conn.send(command(Type.PARTITIONED_METADATA_RESPONSE, partitionMetadataResponse={
            "request_id": request.request_id, "response": pb.CommandPartitionedTopicMetadataResponse.Failed,
            "error": code, "message": message}))
        return
    conn.send(command(Type.PARTITIONED_METADATA_RESPONSE, partitionMetadataResponse={
        "request_id": request.request_id, "partitions": count or 0,
        "response": pb.CommandPartitionedTopicMetadataResponse.Success}))


async def topics_of_namespace(conn: Connection, request: Any) -> None:
    """GET_TOPICS_OF_NAMESPACE (regex subscriptions): the namespace's persistent topics; the
    client applies its pattern (`filtered` stays false)."""
    try:
        namespace = NamespaceName.parse(request.namespace)
        await conn.call(conn.broker.authz.check, conn.principal, Access.NAMESPACE_MEMBER,
                        Target(namespace.tenant, namespace))
        topics: list[str] = []
        if request.mode != pb.CommandGetTopicsOfNamespace.NON_PERSISTENT:
            topics = await conn.call(conn.broker.admin.list_topics, namespace, "persistent")
    except Exception as exc:
        conn.error(request.request_id, exc)
        return
    conn.send(command(Type.GET_TOPICS_OF_NAMESPACE_RESPONSE, getTopicsOfNamespaceResponse={
        "request_id": request.request_id, "topics": topics}))


async def get_schema(conn: Connection, request: Any) -> None:
    """GET_SCHEMA: the topic's latest schema, or a version of it."""
    try:
        topic = TopicName.parse(request.topic)
        await conn.authorize(Access.LOOKUP, topic)
        version = version_of(request.schema_version) if request.HasField("schema_version") else None
        stored = await conn.call(read_schema, conn.broker, topic, version)
    except Exception as exc:
        code, message = server_error(exc)
        conn.send(command(Type.GET_SCHEMA_RESPONSE, getSchemaResponse={
            "request_id": request.request_id, "error_code": code, "error_message": message}))
        return
    conn.send(command(Type.GET_SCHEMA_RESPONSE, getSchemaResponse={
        "request_id": request.request_id, "schema": to_wire(topic, stored),
        "schema_version": version_bytes(stored.version)}))


async def get_or_create_schema(conn: Connection, request: Any) -> None:
    """GET_OR_CREATE_SCHEMA: the version of a schema, registered if the registry's rules allow it."""
    try:
        topic = TopicName.parse(request.topic)
        await conn.authorize(Access.PRODUCE, topic)
        version = await conn.call(get_or_create, conn.broker, topic, request.schema)
    except Exception as exc:
        code, message = server_error(exc)
        conn.send(command(Type.GET_OR_CREATE_SCHEMA_RESPONSE, getOrCreateSchemaResponse={
            "request_id": request.request_id, "error_code": code, "error_message": message}))
        return
    response: dict[str, Any] = {"request_id": request.request_id}
    if version is not None:
        response["schema_version"] = version_bytes(version)
    conn.send(command(Type.GET_OR_CREATE_SCHEMA_RESPONSE, getOrCreateSchemaResponse=response))
