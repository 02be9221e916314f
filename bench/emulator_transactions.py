"""The emulator's TransactWriteItems and Query against the size of the table, with and without
`magnetar.local.moto_fixes` (moto 5.2 deep-copies each table a transaction names, per transaction,
and sorts every item of the table for each Query).

    .venv/bin/python bench/emulator_transactions.py --items 100 1000 5000 --transactions 300

Each case runs in a fresh process on moto's in-process backend (`mock_aws`, no HTTP): a table of
`--items` items, then `--transactions` two-item transactions (a Put and a conditional Update, as a
seal commit), then `--transactions` Queries of one partition key (a topic's cursors or segments).
Reports ms per transaction, ms per query and the resident memory the transactions added. Writes
bench/results/emulator-transactions.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

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
    return {"items": items, "moto_fixes": fixed, "ms_per_transaction": round(elapsed / transactions * 1000, 2),
            "ms_per_query": round(queried / transactions * 1000, 2), "rss_added_mb": round(rss_added, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, nargs="+", default=[100, 1000, 5000])
    parser.add_argument("--transactions", type=int, default=300)
    parser.add_argument("--child", nargs=2, metavar=("ITEMS", "FIXED"), help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/emulator-transactions.json")
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
    result = {"command": " ".join(["bench/emulator_transactions.py", *sys.argv[1:]]),
              "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "load_avg_1_5_15": [round(x, 1) for x in os.getloadavg()], "runs": runs}
    args.out.write_text(json.dumps(result, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
