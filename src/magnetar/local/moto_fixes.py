"""Fixes to moto's backends for a long-running emulator (applied by `magnetar.local.emulator`).

**TransactWriteItems rolls back the items it wrote, not a copy of every table.** moto 5.2 makes
its rollback point by deep-copying each table a transaction names, whole, before every
TransactWriteItems: the cost of one transaction grows with the table (with 1,000 topics a seal
commit copied thousands of metadata items, and the one emulator process spent its time copying),
and the copies are cyclic object graphs that the collector frees late — the emulator of a 200-run
`magnetar verify` grew by ~150 MB a minute (measured: 500 two-item transactions on a fresh table
added 71 MB of resident memory; every other operation together under 15 MB).

The fix keeps moto's own transaction logic (conditions, cancellation reasons, validation) and
replaces only its rollback point: before the call, the items the transaction names are recorded
(their attributes, or their absence); the table's "copy" is the table itself; when moto cancels
the transaction, those items are put back as they were. The emulator applies requests one at a
time (`SerializedApp`), so nothing else sees or changes the items in between, as on DynamoDB.
This patches a third-party class at one point, on purpose: the alternative, re-implementing
TransactWriteItems, would duplicate moto's condition and error handling.

**A Query on a table's key reads that partition, not the whole table.** moto 5.2's `Table.query`
lists every item of the table, sorted, and then keeps those of the queried partition key: a
query's cost grows with the table (with 100 active topics, 36 % of the emulator's time went to
sorting all items for cursor, connection and segment queries; py-spy, 2026-11-23). DynamoDB reads
one partition. The fix hands moto's query the queried partition's items only (the table's own
`items[hash_key]`); moto still sorts, pages, filters and projects them itself. Index queries are
left as moto does them (Magnetar queries no index).

**The list of moto's services is read once.** moto's server looks up the service of every request
by listing its own package directory (`os.listdir` and an `isdir` per entry, ~170 of them): 14 %
of the emulator's time under a PutItem load (py-spy, 2026-11-23). The list cannot change while the
process runs; it is now computed once.

**DynamoDB's attribute values are written out as they are.** moto 5.2 serializes every response
by walking the operation's output shape member by member, looking each member up on the result
through a chain of alias providers; an item is a map of `AttributeValue` structures, so every
attribute of every item returned paid that walk for each of its ten possible members (S, N, B, M,
L, ...): 21 % of the emulator's CPU in an e2e test file, the largest single cost (py-spy). The
results moto's DynamoDB handler builds already hold attribute values in the wire's shape; the fix
writes an `AttributeValue` out directly, with moto's own rules for its members (strings as
strings, binary base64-encoded, maps and lists recursively, absent members left out), and leaves
every other shape to moto's serializer.

**An update expression's processors build their node map once.** moto validates an
UpdateExpression with about ten processors, each walking the expression's tree and asking, for
every node, which node types it processes — a dict of its bound methods built anew each time,
twice per node (its docstring calls the accessor cached; it is not). Each processor's map is the
same for its whole life; it is now built once per processor. And the check that an expression
has at most one SET, REMOVE and ADD clause counted the clauses below every node of the tree (the
count from the root is the largest, and the only one that can fail): it now counts from the root.

**A Kinesis shard finds a record by its sequence number, not by walking the shard.** moto 5.2
keeps a shard's records in an ordered dict keyed by sequence number (1, 2, 3, ... as they were
put) and walked it from the first record for every GetRecords, and listed all its keys for every
PutRecord (to find the last one): both grew with everything the shard ever stored, so a test
session's or a long benchmark's emulator slowed down as it ran, and the journal consumer's
enhanced fan-out polls every 70 ms walked the whole stream. The fix reads the records after an
iterator's position by their numbers (the keys are consecutive as moto assigns them; a shard whose
keys are not falls back to moto's walk) and takes the first and last keys from the dict's ends.
"""

from __future__ import annotations

import functools
import json
from typing import Any

_APPLIED = False


def apply() -> None:
    """Install the fixes (idempotent)."""
    global _APPLIED
    if _APPLIED:
        return
    _transactions_roll_back_their_items()
    _queries_read_their_partition()
    _attribute_values_written_as_they_are()
    _update_expressions_validated_in_linear_time()
    _shards_read_by_sequence_number()
    _services_listed_once()
    _APPLIED = True


def _transactions_roll_back_their_items() -> None:
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.table import Table

    original = DynamoDBBackend.transact_write_items

    @functools.wraps(original)
    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        before = _items_before(self, transact_items)
        Table.__deepcopy__ = _same_table  # type: ignore[attr-defined]  # moto's rollback point: the table itself
        try:
            original(self, transact_items)
        except BaseException:
            _restore(self, before)
            raise
        finally:
            del Table.__deepcopy__  # type: ignore[attr-defined]

    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]


def _queries_read_their_partition() -> None:
    from moto.dynamodb.models.table import Table

    original_query = Table.query

    @functools.wraps(original_query)
    def query(self: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        index_name = args[6] if len(args) > 6 else kwargs.get("index_name")  # moto passes it 8th, by position
        if index_name or hash_key is None or not self.range_key_attr:
            return original_query(self, hash_key, *args, **kwargs)
        # moto's query keeps the items of `all_items()` whose hash key matches: give it that partition only.
        partition = self.items.get(hash_key, {})  # .get: `items` is a defaultdict, a miss must not add a key
        self.all_items = lambda: list(partition.values())  # the emulator serializes requests: nothing else reads it
        try:
            return original_query(self, hash_key, *args, **kwargs)
        finally:
            del self.all_items

    Table.query = query  # type: ignore[method-assign]


def _attribute_values_written_as_they_are() -> None:
    from moto.core.serialize import JSONSerializer

    walk = JSONSerializer._serialize_type_structure

    def serialize_structure(self: Any, serialized: Any, value: Any, shape: Any, key: str) -> None:
        if key and shape.name == "AttributeValue" and isinstance(value, dict):
            serialized[self.get_serialized_name(shape, key)] = _attribute_value(self, value)
            return
        walk(self, serialized, value, shape, key)

    JSONSerializer._serialize_type_structure = serialize_structure  # type: ignore[method-assign]


def _update_expressions_validated_in_linear_time() -> None:
    from moto.dynamodb.parsing.ast_nodes import DepthFirstTraverser  # type: ignore[attr-defined]

    def processing_map(self: Any) -> dict[type, Any]:
        built: dict[type, Any] | None = self.__dict__.get("_processing_map_built")
        if built is None:
            built = self.__dict__["_processing_map_built"] = self._processing_map()
        return built

    def nodes_to_be_processed(self: Any) -> tuple[type, ...]:
        types: tuple[type, ...] | None = self.__dict__.get("_node_types_built")
        if types is None:
            types = self.__dict__["_node_types_built"] = tuple(processing_map(self))
        return types

    def process(self: Any, node: Any) -> Any:
        for class_key, processor in processing_map(self).items():
            if isinstance(node, class_key):
                return processor(node)
        return None

    from moto.dynamodb.parsing.validators import ActionCountValidator

    count_clauses = ActionCountValidator.verify_action_counts

    def verify_action_counts(self: Any, node: Any) -> Any:
        return node if getattr(node, "parent", None) is not None else count_clauses(self, node)

    ActionCountValidator.verify_action_counts = verify_action_counts  # type: ignore[method-assign]
    DepthFirstTraverser.nodes_to_be_processed = nodes_to_be_processed
    DepthFirstTraverser.process = process


def _shards_read_by_sequence_number() -> None:
    from moto.kinesis.models import Shard

    walk_shard = Shard.get_records

    def get_records(self: Any, last_sequence_id: str, limit: int | None) -> tuple[list[Any], int, int]:
        records = self.records
        if not records or (limit is not None and limit <= 0):
            return walk_shard(self, last_sequence_id, limit)
        first, last = next(iter(records)), next(reversed(records))
        if last - first + 1 != len(records):  # not moto's consecutive numbers: its own walk
            return walk_shard(self, last_sequence_id, limit)
        position = int(last_sequence_id)
        start = max(position + 1, first)
        stop = last if limit is None else min(last, start + limit - 1)
        results = [records[n] for n in range(start, stop + 1)]
        if not results:
            return [], position, 0
        behind = records[last].created_at - results[-1].created_at
        return results, results[-1].sequence_number, int(behind * 1000)

    def put_record(self: Any, partition_key: str, data: str, explicit_hash_key: str) -> str:
        from moto.kinesis.models import Record

        number = (next(reversed(self.records)) if self.records else 0) + 1
        self.records[number] = Record(partition_key, data, number, explicit_hash_key)
        return str(number)

    Shard.get_records = get_records  # type: ignore[method-assign]
    Shard.put_record = put_record  # type: ignore[method-assign]
    Shard.get_min_sequence_number = lambda self: next(iter(self.records)) if self.records else 0  # type: ignore[method-assign]
    Shard.get_max_sequence_number = lambda self: next(reversed(self.records)) if self.records else 0  # type: ignore[method-assign]


def _services_listed_once() -> None:
    from moto import backends

    services = tuple(backends.list_of_moto_modules())
    backends.list_of_moto_modules = lambda: services


def _attribute_value(serializer: Any, value: dict[str, Any]) -> dict[str, Any]:
    """An `AttributeValue` as moto's shape walk writes it: members that are None left out,
    binary ones base64-encoded, maps and lists of attribute values recursively, the rest as is
    (strings as strings: moto's string rule keeps None, {} and [] as they are)."""
    out: dict[str, Any] = {}
    for member, v in value.items():
        if v is None:
            continue
        if member == "B":
            out[member] = serializer._base64(v)
        elif member == "BS":
            out[member] = [serializer._base64(b) for b in v]
        elif member == "M":
            out[member] = {k: _attribute_value(serializer, a) for k, a in v.items()}
        elif member == "L":
            out[member] = [_attribute_value(serializer, a) for a in v]
        elif member in ("S", "N"):
            out[member] = v if isinstance(v, str) or v in ({}, []) else str(v)
        elif member in ("SS", "NS"):
            out[member] = [x if isinstance(x, str) else str(x) for x in v]
        else:  # NULL, BOOL
            out[member] = v
    return out


def _same_table(table: Any, memo: dict[int, Any]) -> Any:
    return table


def _items_before(backend: Any, transact_items: list[dict[str, Any]]) -> dict[tuple[str, str], tuple[dict[str, Any],
                                                                                                   dict[str, Any] | None]]:
    """(table, key) -> (key, the item's attributes before the transaction, or None: absent)."""
    before: dict[tuple[str, str], tuple[dict[str, Any], dict[str, Any] | None]] = {}
    for entry in transact_items:
        if len(entry) != 1:
            continue  # moto refuses it before it writes anything
        op_type, op = next(iter(entry.items()))
        table_name = str(op.get("TableName") or "") if isinstance(op, dict) else ""
        table = backend.tables.get(table_name) if table_name else None
        if table is None:
            continue
        if op_type == "Put":
            attrs = op.get("Item") or {}
            key = {a: attrs[a] for a in (table.hash_key_attr, table.range_key_attr) if a is not None and a in attrs}
        else:
            key = op.get("Key") or {}
        try:
            current = backend.get_item(table_name, key)
        except Exception:  # an invalid key: moto refuses the operation itself
            continue
        before[(table_name, json.dumps(key, sort_keys=True))] = (
            key, current.to_json()["Attributes"] if current is not None else None)
    return before


def _restore(backend: Any, before: dict[tuple[str, str], tuple[dict[str, Any], dict[str, Any] | None]]) -> None:
    for (table_name, _), (key, attrs) in before.items():
        if attrs is not None:
            backend.put_item(table_name, attrs)
        elif backend.get_item(table_name, key) is not None:
            backend.delete_item(table_name, key)
