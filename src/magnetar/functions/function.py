"""Pulsar's `Function`: the interface of a function written as a class (`pulsar.Function`).

    from magnetar import Function

    class ExclamationFunction(Function):
        def process(self, input, context):
            return input + '!'

A plain function `def process(input)` (no context) is a function too: name it in `className`.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any


class Function:
    """Interface of a Pulsar Function: `process` is called once per input message with the input
    deserialized (by the topic's schema, else the identity serde) and a `Context`; what it returns
    (unless None) is published to the output topic."""

    @abstractmethod
    def process(self, input: Any, context: Any) -> Any:
        """Process one input message."""
