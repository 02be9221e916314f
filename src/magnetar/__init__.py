"""Magnetar: Apache Pulsar's messaging model as a serverless AWS system.

The SDK mirrors the official `pulsar-client` 3.x API, so porting is a change of import:

    import magnetar
    client = magnetar.Client("http://127.0.0.1:8080")
    producer = client.create_producer("persistent://public/default/orders")
    producer.send(b"payload", partition_key="k", properties={"a": "1"})

The SDK is imported lazily: the Lambda layer ships `magnetar.core` without the SDK's HTTP client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_SDK = {
    "Client": "magnetar.client.client",
    "Producer": "magnetar.client.producer",
    "Consumer": "magnetar.client.consumer",
    "PushConsumer": "magnetar.client.push",
    "Message": "magnetar.client.message",
    "MessageId": "magnetar.client.message",
    "ConsumerType": "magnetar.client.types",
    "CompressionType": "magnetar.client.types",
    "BatchingType": "magnetar.client.types",
    "PartitionsRoutingMode": "magnetar.client.types",
    "ProducerAccessMode": "magnetar.client.types",
    "ConsumerDeadLetterPolicy": "magnetar.client.types",
    "Reader": "magnetar.client.reader",
    "TableView": "magnetar.client.table_view",
    "ConsumerBatchReceivePolicy": "magnetar.client.types",
    "InitialPosition": "magnetar.client.types",
    "Result": "magnetar.client.types",
    "Authentication": "magnetar.client.auth",
    "AuthenticationToken": "magnetar.client.auth",
    "AuthenticationTLS": "magnetar.client.auth",
    "AuthenticationBasic": "magnetar.client.auth",
    "AuthenticationAwsIam": "magnetar.client.auth",
    "KeySharedMode": "magnetar.client.types",
    "ConsumerKeySharedPolicy": "magnetar.client.types",
    "RegexSubscriptionMode": "magnetar.client.types",
    "ConsumerCryptoFailureAction": "magnetar.client.types",
    "CryptoKeyReader": "magnetar.client.crypto",
    "EncryptionContext": "magnetar.client.crypto",
    "EncryptionKey": "magnetar.client.crypto",
    "LoggerLevel": "magnetar.client.types",
    "ConsoleLogger": "magnetar.client.types",
    "FileLogger": "magnetar.client.types",
    "ServiceInfo": "magnetar.client.failover",
    "ServiceInfoProvider": "magnetar.client.failover",
    "AutoClusterFailover": "magnetar.client.failover",
    # pulsar-client's configuration objects (its `_pulsar` module's), in Python
    "ProducerConfiguration": "magnetar.client.config",
    "ConsumerConfiguration": "magnetar.client.config",
    "ReaderConfiguration": "magnetar.client.config",
    # Pulsar Functions (pulsar.Function, pulsar.Context, pulsar.SerDe...)
    "Function": "magnetar.functions.function",
    "Context": "magnetar.functions.context",
    "SerDe": "magnetar.functions.serde",
    "IdentitySerDe": "magnetar.functions.serde",
    "PickleSerDe": "magnetar.functions.serde",
}
# pulsar-client exports every exception at the top level too (`pulsar.Timeout`)
_EXCEPTIONS = "magnetar.client.exceptions"

if TYPE_CHECKING:
    from magnetar.client import exceptions
    from magnetar.client.auth import (
        Authentication,
        AuthenticationAwsIam,
        AuthenticationBasic,
        AuthenticationTLS,
        AuthenticationToken,
    )
    from magnetar.client.client import Client
    from magnetar.client.config import ConsumerConfiguration, ProducerConfiguration, ReaderConfiguration
    from magnetar.client.consumer import Consumer
    from magnetar.client.crypto import CryptoKeyReader, EncryptionContext, EncryptionKey
    from magnetar.client.failover import AutoClusterFailover, ServiceInfo, ServiceInfoProvider
    from magnetar.client.message import Message, MessageId
    from magnetar.client.producer import Producer
    from magnetar.client.push import PushConsumer
    from magnetar.client.reader import Reader
    from magnetar.client.table_view import TableView
    from magnetar.client.types import (
        BatchingType,
        CompressionType,
        ConsoleLogger,
        ConsumerBatchReceivePolicy,
        ConsumerCryptoFailureAction,
        ConsumerDeadLetterPolicy,
        ConsumerKeySharedPolicy,
        ConsumerType,
        FileLogger,
        InitialPosition,
        KeySharedMode,
        LoggerLevel,
        PartitionsRoutingMode,
        ProducerAccessMode,
        RegexSubscriptionMode,
        Result,
    )
    from magnetar.functions.context import Context
    from magnetar.functions.function import Function
    from magnetar.functions.serde import IdentitySerDe, PickleSerDe, SerDe


def __getattr__(name: str) -> Any:
    import importlib

    if name == "exceptions":
        return importlib.import_module("magnetar.client.exceptions")
    if name in _SDK:
        return getattr(importlib.import_module(_SDK[name]), name)
    errors = importlib.import_module(_EXCEPTIONS)
    if isinstance(getattr(errors, name, None), type) and issubclass(getattr(errors, name), Exception):
        return getattr(errors, name)
    raise AttributeError(f"module 'magnetar' has no attribute {name!r}")


__all__ = [
    "Authentication",
    "AuthenticationAwsIam",
    "AuthenticationBasic",
    "AuthenticationTLS",
    "AuthenticationToken",
    "AutoClusterFailover",
    "BatchingType",
    "Client",
    "CompressionType",
    "ConsoleLogger",
    "Consumer",
    "ConsumerBatchReceivePolicy",
    "ConsumerConfiguration",
    "ConsumerCryptoFailureAction",
    "ConsumerDeadLetterPolicy",
    "ConsumerKeySharedPolicy",
    "ConsumerType",
    "Context",
    "CryptoKeyReader",
    "EncryptionContext",
    "EncryptionKey",
    "FileLogger",
    "Function",
    "IdentitySerDe",
    "InitialPosition",
    "KeySharedMode",
    "LoggerLevel",
    "Message",
    "MessageId",
    "PartitionsRoutingMode",
    "PickleSerDe",
    "Producer",
    "ProducerAccessMode",
    "ProducerConfiguration",
    "PushConsumer",
    "Reader",
    "ReaderConfiguration",
    "RegexSubscriptionMode",
    "Result",
    "SerDe",
    "ServiceInfo",
    "ServiceInfoProvider",
    "TableView",
    "exceptions",
]
