"""`magnetar`'s SDK against the official pulsar-client's public API, mechanically.

The snapshot `tests/fixtures_local/pulsar_client_api.json` is pulsar-client's surface (written by
`scripts/pulsar_api_snapshot.py`, which says how to regenerate it for a new release), so this test
needs no pulsar-client installed. Every public name must exist in `magnetar` (exceptions also in
`magnetar.exceptions`, with pulsar-client's bases), every enum member, every method, every
parameter with the same default, integer enum members with pulsar-client's numbers, Pulsar's positional parameters in Pulsar's order, and Magnetar
may require no parameter Pulsar does not. What deliberately differs is listed in `DIFFERENCES`,
each with its reason; an entry that no longer differs fails too, so the list stays true.
"""

from __future__ import annotations

import enum
import inspect
import json
import re
from pathlib import Path
from typing import Any

import pytest

import magnetar
from magnetar.client import exceptions

SNAPSHOT = json.loads((Path(__file__).parent.parent / "fixtures_local" / "pulsar_client_api.json").read_text())

_NATIVE = "a wrapper of pulsar-client's C++ object: nothing to wrap here"

# name, "Class.method" or "Class.method(parameter)" -> why it deliberately differs
DIFFERENCES: dict[str, str] = {
    # --- whole names ----------------------------------------------------------------------------
    "AuthenticationAthenz": "Athenz is a Yahoo-specific plugin; Magnetar authenticates with tokens, Basic or IAM",
    "AuthenticationOauth2": "OAuth2 client credentials flow not built; a token from any OAuth2 server works "
                            "with AuthenticationToken(supplier)",
    "ServiceInfo.wrap": _NATIVE,
    "BatchReceivePolicy": _NATIVE,
    "KeySharedPolicy": _NATIVE,
    "DeadLetterPolicyBuilder": _NATIVE,
    "ConsumerBatchReceivePolicy.policy": _NATIVE,
    "ConsumerDeadLetterPolicy.policy": _NATIVE,
    "ConsumerKeySharedPolicy.policy": _NATIVE,
    "MessageBatch": "parses the binary protocol's batch format; Magnetar's entries are not that format",
    # --- parameters -----------------------------------------------------------------------------
    "Client.create_producer(batching_enabled=)": "default None (on unless chunking_enabled), not False: one AWS "
                                                "request per message otherwise (send_async under load); "
                                                "batching_enabled=False works",
    "Client.create_producer(batching_max_publish_delay_ms=)": "default 100, not 10: every request is an API call, "
                                                             "a Lambda invocation, a reservation and a journal record",
}


def _enum_default(text: str) -> str:
    """`<CompressionType.NONE: 0>` -> `CompressionType.NONE`: members compare by name, not value."""
    match = re.fullmatch(r"<(\w+\.\w+): .*>", text)
    return match.group(1) if match else text


def _normalize(default: Any) -> str:
    text = repr(default)
    if type(default).__module__.startswith("magnetar.schema"):  # schema=BytesSchema(): the class, not the object
        return f"<pulsar.schema.schema.{type(default).__name__} object>"
    if isinstance(default, magnetar.ProducerAccessMode | magnetar.CompressionType) or (hasattr(default, "name") \
            and hasattr(default, "value") and type(default).__module__.startswith("magnetar")):
        return f"{type(default).__name__}.{default.name}"
    return _enum_default(text)


def compare_callable(where: str, pulsar_params: list[dict[str, Any]], ours: Any) -> list[str]:
    """What `ours` lacks of a pulsar-client callable's parameters, or requires beyond them."""
    problems: list[str] = []
    try:
        signature = inspect.signature(ours)
    except (TypeError, ValueError):
        return [f"{where}: no signature"]
    mine = {name: p for name, p in signature.parameters.items() if name not in ("self", "cls")}
    pulsar_names = [p["name"] for p in pulsar_params if p["name"] != "cls"]
    for p in pulsar_params:
        name = p["name"]
        if name == "cls" or f"{where}({name})" in DIFFERENCES:
            continue
        if f"{where}({name}=)" in DIFFERENCES:
            p = {k: v for k, v in p.items() if k != "default"}
        if name not in mine:
            problems.append(f"{where}: no parameter {name!r}")
            continue
        if "default" in p:
            if mine[name].default is inspect.Parameter.empty:
                problems.append(f"{where}({name}): required here, default {p['default']} in pulsar-client")
            elif _normalize(mine[name].default) != _enum_default(p["default"]):
                problems.append(f"{where}({name}): default {_normalize(mine[name].default)}, "
                                f"pulsar-client {_enum_default(p['default'])}")
    for name, param in mine.items():
        if name not in pulsar_names and f"{where}({name})" not in DIFFERENCES and \
                param.default is inspect.Parameter.empty and param.kind not in (
                inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            problems.append(f"{where}: requires {name!r}, which pulsar-client does not have")
    # pulsar-client's positional parameters keep their relative order, before Magnetar's own
    positional = [n for n, p in mine.items() if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
    shared = [n for n in pulsar_names if n in positional]
    if positional[:len(shared)] != shared and f"{where}(order)" not in DIFFERENCES:
        problems.append(f"{where}: positional order {positional[:len(shared)]}, pulsar-client {shared}")
    return problems


def compare(pulsar: dict[str, Any], module: Any, errors: Any) -> list[str]:
    """Every difference between pulsar-client's surface `pulsar` and `module`, minus DIFFERENCES."""
    problems: list[str] = []
    for name, spec in sorted(pulsar["names"].items()):
        if name in DIFFERENCES:
            continue
        ours = getattr(module, name, None)
        if ours is None:
            problems.append(f"missing name {name}")
            continue
        if spec["kind"] == "exception":
            if not (isinstance(ours, type) and issubclass(ours, Exception)):
                problems.append(f"{name} is not an exception")
                continue
            error_class: type = ours
            if getattr(errors, name, None) is not error_class:
                problems.append(f"{name} is not in magnetar.exceptions")
            mro = {c.__name__ for c in inspect.getmro(error_class)}
            problems += [f"{name} does not derive from {b}" for b in spec["bases"] if b not in mro]
        elif spec["kind"] == "enum":
            problems += [f"{name} has no member {m}" for m in spec["members"] if not hasattr(ours, m)]
            for member, number in spec.get("values", {}).items():  # int-valued enums: pulsar-client's numbers
                value = getattr(getattr(ours, member, None), "value", None)
                if isinstance(value, int) and value != number:
                    problems.append(f"{name}.{member} is {value}, pulsar-client {number}")
        elif spec["kind"] == "function":
            problems += compare_callable(name, spec["parameters"], ours)
        else:
            for method, mspec in sorted(spec["methods"].items()):
                where = f"{name}.{method}"
                if where in DIFFERENCES:
                    continue
                if not hasattr(ours, method) and method not in getattr(ours, "__dataclass_fields__", {}):
                    problems.append(f"missing {where}")
                elif mspec.get("parameters") is not None:
                    problems += compare_callable(where, mspec["parameters"], getattr(ours, method))
    problems += [f"missing exception {n} in magnetar.exceptions" for n in pulsar["exceptions_module"]
                 if n not in DIFFERENCES and not hasattr(errors, n)]
    return problems


def test_snapshot_is_of_pulsar_client_3() -> None:
    assert SNAPSHOT["pulsar_client_version"].startswith("3.")
    assert len(SNAPSHOT["names"]) > 80  # the whole surface, not an empty or truncated file


def test_magnetar_has_pulsar_clients_surface() -> None:
    problems = compare(SNAPSHOT, magnetar, exceptions)
    assert problems == [], "\n".join(problems)


def _pulsar_params(owner: str, method: str) -> list[dict[str, Any]]:
    return list(SNAPSHOT["names"][owner]["methods"][method]["parameters"])


def test_every_listed_difference_still_differs() -> None:
    """An entry for something Magnetar now has as pulsar-client has it is stale: remove it."""
    stale = []
    for key in DIFFERENCES:
        where, _, param = key.rstrip(")").partition("(")
        owner, _, method = where.partition(".")
        assert owner in SNAPSHOT["names"], f"{key}: pulsar-client has no {owner}"
        ours = getattr(magnetar, owner, None)
        if not param:
            if (hasattr(ours, method) if method else ours is not None):
                stale.append(key)
            continue
        signature = inspect.signature(getattr(ours, method))
        if param == "order":
            positional = [n for n, p in signature.parameters.items() if n != "self"]
            if positional[:4] == [p["name"] for p in _pulsar_params(owner, method)][:4]:
                stale.append(key)
        elif param.endswith("="):
            pulsar_default = next(p["default"] for p in _pulsar_params(owner, method) if p["name"] == param[:-1])
            if _normalize(signature.parameters[param[:-1]].default) == _enum_default(pulsar_default):
                stale.append(key)
        elif param not in {p["name"] for p in _pulsar_params(owner, method)}:
            if param not in signature.parameters:  # a parameter only Magnetar requires
                stale.append(key)
        elif param in signature.parameters:
            stale.append(key)
    assert stale == [], f"no longer different, remove from DIFFERENCES: {stale}"


def test_the_comparison_fails_when_a_name_or_keyword_disappears() -> None:
    """The check itself: a kwarg or a name removed from Magnetar is reported."""

    class Shrunk:
        def create_producer(self, producer_name: str | None = "x", topic: str = "") -> None:
            """create_producer without send_timeout_millis, another default, another order"""

        def extra(self, topic: str, needed: int) -> None:
            """a required parameter pulsar-client lacks"""

    class Routing(enum.Enum):
        A = 1

    fake_module = type("M", (), {"Client": Shrunk, "Routing": Routing})
    surface = {
        "names": {
            "Client": {"kind": "class", "bases": [], "methods": {
                "create_producer": {"kind": "method", "parameters": [
                    {"name": "topic", "kind": "POSITIONAL_OR_KEYWORD"},
                    {"name": "producer_name", "kind": "POSITIONAL_OR_KEYWORD", "default": "None"},
                    {"name": "send_timeout_millis", "kind": "POSITIONAL_OR_KEYWORD", "default": "30000"}]},
                "extra": {"kind": "method", "parameters": [{"name": "topic", "kind": "POSITIONAL_OR_KEYWORD"}]},
                "close": {"kind": "method", "parameters": []}}},
            "Gone": {"kind": "class", "bases": [], "methods": {}},
            "Routing": {"kind": "enum", "members": ["A", "B"], "values": {"A": 0, "B": 1}},
        },
        "exceptions_module": [],
    }
    problems = compare(surface, fake_module, exceptions)
    assert "Client.create_producer: no parameter 'send_timeout_millis'" in problems
    assert "Client.create_producer(producer_name): default 'x', pulsar-client None" in problems
    assert "Client.create_producer: positional order ['producer_name', 'topic'], pulsar-client " \
           "['topic', 'producer_name']" in problems
    assert "missing Client.close" in problems
    assert "missing name Gone" in problems
    assert "Routing has no member B" in problems and "Routing.A is 1, pulsar-client 0" in problems
    assert "Client.extra: requires 'needed', which pulsar-client does not have" in problems


@pytest.mark.parametrize("name", ["Timeout", "CumulativeAcknowledgementNotAllowedError", "ProducerFenced"])
def test_exceptions_are_importable_both_ways(name: str) -> None:
    assert getattr(magnetar, name) is getattr(magnetar.exceptions, name)
    assert issubclass(getattr(magnetar, name), magnetar.exceptions.PulsarException)
