"""pulsar-client's C++ extension module, as far as programs import it directly.

Its configuration objects are the SDK's (`magnetar.ProducerConfiguration`, `ConsumerConfiguration`,
`ReaderConfiguration`: the same accessors, in Python; `options()` gives them as keyword arguments
of `create_producer`, `subscribe`, `create_reader`). `ClientConfiguration` is here only to be
refused when used: the SDK's `Client` takes its settings as keyword arguments.
"""

from __future__ import annotations

from typing import Any

from magnetar.client.config import ConsumerConfiguration, ProducerConfiguration, ReaderConfiguration

__all__ = ["ClientConfiguration", "ConsumerConfiguration", "ProducerConfiguration", "ReaderConfiguration"]


class ClientConfiguration:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError("ClientConfiguration is pulsar-client's C++ object: the SDK's Client takes "
                                  "these settings as keyword arguments")
