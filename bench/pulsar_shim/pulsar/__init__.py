"""`import pulsar` answered by Magnetar's SDK: a program (or a test suite) written for pulsar-client
runs on the SDK with this folder first on its path, and nothing else changed.

bench/pulsar_client_suite.py puts it there to run pulsar-client's own tests through the SDK.
"""

from __future__ import annotations

import sys
from typing import Any

import magnetar
import magnetar.schema as schema
from magnetar import *  # noqa: F403 - pulsar's names are the SDK's
from magnetar.client.exceptions import *  # noqa: F403 - pulsar.Timeout, pulsar.PulsarException, ...

sys.modules[f"{__name__}.schema"] = schema  # `from pulsar.schema import ...`
sys.modules[f"{__name__}.exceptions"] = magnetar.exceptions


def __getattr__(name: str) -> Any:
    return getattr(magnetar, name)
