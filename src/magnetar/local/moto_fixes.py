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
    from moto import backends

    services = tuple(backends.list_of_moto_modules())
    backends.list_of_moto_modules = lambda: services
    _APPLIED = True


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
