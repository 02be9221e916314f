"""The emulator's DynamoDB operations, with and without `magnetar.local.moto_fixes`: moto 5.2
deep-copies each table a transaction names, per transaction, sorts every item of the table for
each Query, walks the output shape member by member for every attribute of every item it returns,
and validates an update expression in time quadratic in its size.

    .venv/bin/python bench/emulator_dynamodb.py --items 100 1000 5000 --transactions 300

Each case runs in a fresh process on moto's in-process backend (`mock_aws`, no HTTP): a table of
`--items` items, then `--transactions` of each: two-item transactions (a Put and a conditional
Update, as a seal commit), Queries of one partition key (a topic's cursors or segments),
BatchGetItems of three items shaped as a consumer's look (a cursor, a seal state with its newest
segments, a writer item) and conditional UpdateItems shaped as a publish's reservation. Reports ms
per operation (the boto3 client's share included, the same in both cases) and the resident
memory the transactions added. Writes bench/results/emulator-dynamodb.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def rss_mb() -> float:
    with open(f"/proc/{os.getpid()}/status") as f:
        return int(f.read().split("VmRSS:")[1].split()[0]) / 1024


def child(items: int, transactions: int, fixed: bool) -> dict[str, float]:
    os.environ.update(AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test", AWS_DEFAULT_REGION="us-east-1")
    import boto3
    from moto import mock_aws

    if fixed:
        from magnetar.local import moto_fixes

        moto_fixes.apply()
    with mock_aws():
        ddb = boto3.client("dynamodb")
        ddb.create_table(TableName="t", BillingMode="PAY_PER_REQUEST",
                         KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
                         AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                               {"AttributeName": "sk", "AttributeType": "S"}])
        for i in range(items):
            ddb.put_item(TableName="t", Item={"pk": {"S": f"TP#{i}"}, "sk": {"S": "SEAL"}, "v": {"S": "x" * 200}})
        ddb.put_item(TableName="t", Item={"pk": {"S": "W"}, "sk": {"S": "W"}, "n": {"N": "0"}})
        before, started = rss_mb(), time.perf_counter()
        for i in range(transactions):
            ddb.transact_write_items(TransactItems=[
                {"Put": {"TableName": "t", "Item": {"pk": {"S": "SEG"}, "sk": {"S": f"{i:08d}"}}}},
                {"Update": {"TableName": "t", "Key": {"pk": {"S": "W"}, "sk": {"S": "W"}},
                            "UpdateExpression": "SET n = :n", "ConditionExpression": "n = :old",
                            "ExpressionAttributeValues": {":n": {"N": str(i + 1)}, ":old": {"N": str(i)}}}},
            ])
        elapsed = time.perf_counter() - started
        rss_added = rss_mb() - before
        started = time.perf_counter()
        for i in range(transactions):
            ddb.query(TableName="t", KeyConditionExpression="pk = :p",
                      ExpressionAttributeValues={":p": {"S": f"TP#{i % max(items, 1)}"}})
        queried = time.perf_counter() - started
        look = [{"pk": {"S": "LOOK"}, "sk": {"S": sk}} for sk in ("CURSOR", "SEAL", "WRITER")]
        for key in look:
            ddb.put_item(TableName="t", Item=key | LOOK_ITEM)
        started = time.perf_counter()
        for _ in range(transactions):
            ddb.batch_get_item(RequestItems={"t": {"Keys": look}})
        looked = time.perf_counter() - started
        started = time.perf_counter()
        for i in range(transactions):
            ddb.update_item(TableName="t", Key=look[2], ReturnValues="UPDATED_NEW", **reservation(i))
        reserved = time.perf_counter() - started

    def per(seconds: float) -> float:
        return round(seconds / transactions * 1000, 2)

    return {"items": items, "moto_fixes": fixed, "ms_per_transaction": per(elapsed), "ms_per_query": per(queried),
            "ms_per_batch_get": per(looked), "ms_per_reservation": per(reserved), "rss_added_mb": round(rss_added, 1)}


# an item of a consumer's look: nested maps as a cursor's consumers and a seal state's segments
LOOK_ITEM: dict[str, Any] = {
    "version": {"N": "7"},
    "consumers": {"M": {f"c{k}": {"M": {"lease": {"N": "1764400000000"}, "acked": {"L": [{"N": str(j)} for j in range(8)]},
                                        "name": {"S": f"consumer-{k}"}}} for k in range(4)}},
    "segments": {"L": [{"M": {"first": {"N": str(j * 100)}, "last": {"N": str(j * 100 + 99)},
                              "key": {"S": f"segments/t/{j:08d}"}, "bytes": {"N": "102400"}}} for j in range(6)]},
    "payload": {"B": b"\x00" * 64},
    "producers": {"M": {}},
}


def reservation(i: int) -> dict[str, Any]:
    """An UpdateItem shaped as a publish's reservation: ids, counters, the producer's stats, a fence."""
    return {
        "UpdateExpression": "SET next_entry = if_not_exists(next_entry, :zero) + :n, last_publish = :now, "
                            "producers.#p = :stats, rate_at = :now ADD msgs_in :m, bytes_in :b",
        "ConditionExpression": "attribute_exists(pk) AND attribute_not_exists(deleted_at) AND "
                               "(attribute_not_exists(exclusive_producer) OR exclusive_producer = :pn "
                               "OR exclusive_until < :now)",
        "ExpressionAttributeNames": {"#p": "producer-1"},
        "ExpressionAttributeValues": {":zero": {"N": "0"}, ":n": {"N": "3"}, ":now": {"N": str(1764400000000 + i)},
                                      ":m": {"N": "30"}, ":b": {"N": "30000"}, ":pn": {"S": "producer-1"},
                                      ":stats": {"M": {"last": {"N": str(i)}, "msgs": {"N": str(30 * i)}}}},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, nargs="+", default=[100, 1000, 5000])
    parser.add_argument("--transactions", type=int, default=300)
    parser.add_argument("--child", nargs=2, metavar=("ITEMS", "FIXED"), help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/emulator-dynamodb.json")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(int(args.child[0]), args.transactions, args.child[1] == "on")))
        return
    runs = []
    for items in args.items:
        for fixed in ("off", "on"):
            out = subprocess.run([sys.executable, __file__, "--child", str(items), fixed,
                                  "--transactions", str(args.transactions)],
                                 capture_output=True, text=True, check=True).stdout
            runs.append(json.loads(out.strip().splitlines()[-1]))
            print(runs[-1], flush=True)
    result = {"command": " ".join(["bench/emulator_dynamodb.py", *sys.argv[1:]]),
              "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "load_avg_1_5_15": [round(x, 1) for x in os.getloadavg()], "runs": runs}
    args.out.write_text(json.dumps(result, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
