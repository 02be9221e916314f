"""The schema registry's rules against the in-memory store: each strategy with an accepted and a
refused evolution, identical schemas, deletes, bad schemas, producers' and consumers' checks."""

from __future__ import annotations

import json

import pytest

from magnetar.adapters.memory import memory_broker
from magnetar.core.errors import InvalidInput, NotFound
from magnetar.core.naming import TopicName
from magnetar.core.schema import SchemaData, check_compatible, parse_schema
from magnetar.core.schema.registry import IncompatibleSchema, SchemaPolicy


def avro(*fields: dict[str, object]) -> SchemaData:
    return parse_schema("AVRO", json.dumps({"type": "record", "name": "User", "fields": list(fields)}))


NAME = {"name": "name", "type": "string"}
AGE = {"name": "age", "type": "int"}
AGE_DEFAULT = {"name": "age", "type": "int", "default": 0}
V1 = avro(NAME)
ADD_REQUIRED = avro(NAME, AGE)  # BACKWARD-incompatible (no default), FORWARD-compatible
ADD_DEFAULT = avro(NAME, AGE_DEFAULT)  # compatible both ways
DROP_NAME = avro(AGE_DEFAULT)  # reads nothing of V1's required field... readers of V1 cannot read it
TOPIC = TopicName.parse("persistent://public/default/users")


@pytest.mark.parametrize(("strategy", "new", "accepted"), [
    ("BACKWARD", ADD_DEFAULT, True), ("BACKWARD", ADD_REQUIRED, False),
    ("FORWARD", ADD_REQUIRED, True), ("FORWARD", DROP_NAME, False),
    ("FULL", ADD_DEFAULT, True), ("FULL", ADD_REQUIRED, False),
    ("ALWAYS_COMPATIBLE", parse_schema("STRING", ""), True), ("ALWAYS_INCOMPATIBLE", ADD_DEFAULT, False),
])
def test_each_strategy_accepts_and_refuses(strategy: str, new: SchemaData, accepted: bool) -> None:
    assert (check_compatible(new, [V1], strategy) is None) is accepted


def test_transitive_strategies_check_every_version() -> None:
    # readers of {name} cannot read data of {age} (name missing, no default)
    assert check_compatible(DROP_NAME, [V1, ADD_DEFAULT], "FORWARD") is not None
    with_default_name = avro({"name": "name", "type": "string", "default": ""}, AGE_DEFAULT)
    only_age = avro(AGE)  # v1's data has no age and this has no default: not BACKWARD of v1
    assert check_compatible(only_age, [V1, with_default_name], "BACKWARD") is None  # latest only
    assert check_compatible(only_age, [V1, with_default_name], "BACKWARD_TRANSITIVE") is not None
    assert check_compatible(only_age, [V1, with_default_name], "FULL_TRANSITIVE") is not None


def test_types_and_key_values() -> None:
    assert check_compatible(parse_schema("INT32", ""), [parse_schema("STRING", "")], "FULL") is not None
    assert check_compatible(parse_schema("STRING", ""), [parse_schema("STRING", "")], "FULL") is None

    def kv(value: SchemaData) -> SchemaData:
        return parse_schema("KEY_VALUE", json.dumps({"key": "", "value": json.loads(value.data)}),
                            {"key.schema.type": "STRING", "value.schema.type": "AVRO", "kv.encoding.type": "SEPARATED"})

    assert check_compatible(kv(ADD_DEFAULT), [kv(V1)], "FULL") is None
    refused = check_compatible(kv(ADD_REQUIRED), [kv(V1)], "FULL")
    assert refused is not None and "value" in refused


def named(name: str, *fields: dict[str, object]) -> SchemaData:
    return parse_schema("AVRO", json.dumps({"type": "record", "name": name, "fields": list(fields)}))


def test_record_names_do_not_matter_as_in_pulsars_check() -> None:
    """Pulsar asks Avro's SchemaValidator, which resolves grammars: records match by their fields,
    whatever their names (pulsar-client's suite evolves `User1` into `User2`); enum and fixed
    types keep their names."""
    user1 = named("User1", {"name": "name", "type": ["null", "string"]}, {"name": "age", "type": ["null", "int"]})
    user2 = named("User2", {"name": "age", "type": "int"}, {"name": "name", "type": ["null", "string"]})
    assert check_compatible(user2, [user1], "FORWARD") is None  # User1 reads User2's data
    refused = check_compatible(user2, [user1], "BACKWARD")  # User2's int age cannot read User1's null
    assert refused is not None and "type_mismatch" in refused and "name_mismatch" not in refused

    def holder(name: str, inner: dict[str, object]) -> SchemaData:
        return named(name, {"name": "inner", "type": ["null", inner], "default": None})

    point = {"type": "record", "name": "Point", "fields": [{"name": "x", "type": "int"}]}
    place = {"type": "record", "name": "Place", "fields": [{"name": "x", "type": "int"}]}
    assert check_compatible(holder("B", place), [holder("A", point)], "FULL") is None  # a union branch too
    color = {"type": "enum", "name": "Color", "symbols": ["RED"]}
    hue = {"type": "enum", "name": "Hue", "symbols": ["RED"]}
    assert check_compatible(holder("A", hue), [holder("A", color)], "FULL") is not None  # an enum's name counts
    assert check_compatible(named("B", {"name": "c", "type": hue}), [named("A", {"name": "c", "type": color})],
                            "FULL") is not None


@pytest.mark.parametrize(("type_name", "data"), [
    ("AVRO", "{not json"), ("AVRO", '{"type": "record", "name": "X"}'), ("JSON", ""), ("AVRO", '"nosuchtype"'),
    ("STRNG", ""), (7, ""), ("KEY_VALUE", "[]"),
    ("KEY_VALUE", json.dumps({"key": "", "value": "{bad"})),
])
def test_bad_schemas_are_refused(type_name: object, data: str) -> None:
    props = {"key.schema.type": "STRING", "value.schema.type": "AVRO"} if type_name == "KEY_VALUE" else {}
    with pytest.raises(InvalidInput):
        parse_schema(type_name, data, props)


def test_registry_versions_identical_schemas_and_deletes() -> None:
    registry = memory_broker().schemas
    assert registry.put(TOPIC, V1, "FULL") == 0
    same_other_spelling = SchemaData("AVRO", json.dumps(json.loads(V1.data), indent=2))
    assert registry.put(TOPIC, same_other_spelling, "ALWAYS_INCOMPATIBLE") == 0
    assert registry.put(TOPIC, ADD_DEFAULT, "FULL") == 1
    with pytest.raises(IncompatibleSchema, match="Incompatible schema: FULL"):
        registry.put(TOPIC, DROP_NAME, "FULL")
    assert [s.version for s in registry.current(TOPIC)] == [0, 1]
    # a partition shares its partitioned topic's schema
    assert registry.latest(TopicName.parse("persistent://public/default/users-partition-3")).version == 1
    assert registry.delete(TOPIC) == 2
    with pytest.raises(NotFound):
        registry.latest(TOPIC)
    assert registry.put(TOPIC, parse_schema("STRING", ""), "FULL") == 3  # a new history after a delete
    assert registry.version(TOPIC, 1).schema.same_as(ADD_DEFAULT)  # old versions stay readable
    with pytest.raises(NotFound):
        registry.version(TOPIC, 2)


def test_producers_and_consumers_are_checked() -> None:
    registry = memory_broker().schemas
    policy = SchemaPolicy()
    assert registry.for_producer(TOPIC, None, policy) is None  # no schema: bytes, allowed
    assert registry.for_producer(TOPIC, V1, policy) == 0  # the first schema registers
    assert registry.for_producer(TOPIC, None, policy) is None  # not enforced: a bytes producer may write
    with pytest.raises(IncompatibleSchema):
        registry.for_producer(TOPIC, None, SchemaPolicy(validation_enforced=True))
    with pytest.raises(IncompatibleSchema, match="isAllowAutoUpdateSchema"):
        registry.for_producer(TOPIC, ADD_DEFAULT, SchemaPolicy(auto_update=False))
    assert registry.for_producer(TOPIC, V1, SchemaPolicy(auto_update=False)) == 0
    # consumers: compatible readers pass without a new version, incompatible ones are refused
    assert registry.for_consumer(TOPIC, ADD_DEFAULT, policy) is None
    assert [s.version for s in registry.current(TOPIC)] == [0]
    with pytest.raises(IncompatibleSchema):
        registry.for_consumer(TOPIC, parse_schema("INT64", ""), policy)
    assert registry.for_consumer(TOPIC, parse_schema("BYTES", ""), policy) is None


def test_publish_checks_use_the_cached_versions() -> None:
    from magnetar.adapters.memory import ManualClock

    clock = ManualClock()
    registry = memory_broker(clock).schemas
    registry.check_publish(TOPIC, None, enforced=True)  # no schema yet: anything goes
    registry.put(TOPIC, V1, "FULL")
    registry.check_publish(TOPIC, None, enforced=False)
    registry.check_publish(TOPIC, None, enforced=True)  # the cached "no schema" holds for up to 10 s
    clock.advance(10_000)
    with pytest.raises(IncompatibleSchema):
        registry.check_publish(TOPIC, None, enforced=True)
    registry.check_publish(TOPIC, 0, enforced=True)
    reads = []
    original = registry.store.get_schemas
    registry.store.get_schemas = lambda sid: reads.append(sid) or original(sid)  # type: ignore[method-assign]
    registry.check_publish(TOPIC, 0, enforced=True)
    assert reads == []  # cached
    registry.put(TOPIC, ADD_DEFAULT, "FULL")
    reads.clear()
    registry.check_publish(TOPIC, 1, enforced=True)  # a version not seen yet: read again, found
    assert len(reads) >= 1
    with pytest.raises(NotFound):
        registry.check_publish(TOPIC, 7, enforced=False)
