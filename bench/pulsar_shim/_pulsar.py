"""pulsar-client's C++ extension module, as far as programs import it directly.

Its configuration objects (`ProducerConfiguration`, `ConsumerConfiguration`, ...) wrap the C++
client's; the SDK has none (its options are the keyword arguments of `create_producer` and
`subscribe`), so each name is here only to be refused when used.
"""

from __future__ import annotations

from typing import Any


class _Native:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} is pulsar-client's C++ object: the SDK takes these "
                                  "options as keyword arguments of create_producer / subscribe")


class ProducerConfiguration(_Native):
    pass


class ConsumerConfiguration(_Native):
    pass


class ReaderConfiguration(_Native):
    pass


class ClientConfiguration(_Native):
    pass
