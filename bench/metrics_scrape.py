"""What a Prometheus scrape of one namespace of many topics costs (docs/metrics.md, "Measured").

    .venv/bin/python bench/metrics_scrape.py --topics 1000

Starts its own `magnetar local up`, creates a namespace of `--topics` topics (the first three with a
subscription), scrapes `GET /metrics?namespace=...` as Prometheus does (gzip) and writes
(bench/results/metrics-scrape.json) the AWS requests the scrape made (its own
`magnetar_scrape_aws_requests`), how long it took, and the topic-level exposition's size, plain
and gzipped. tests/e2e/test_metrics.py checks the same request counts on 200 topics.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

import magnetar
from magnetar.client.admin import AdminClient
from magnetar.local.cluster import LocalUpProcess

RESULTS = Path(__file__).resolve().parent / "results" / "metrics-scrape.json"


def measure(url: str, topics: int) -> dict[str, Any]:
    namespace = f"public/scrape-{uuid.uuid4().hex[:8]}"
    names = [f"persistent://{namespace}/t{i:05d}" for i in range(topics)]
    admin, client = AdminClient(url), magnetar.Client(url)
    try:
        admin.create_namespace(namespace)
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(admin.create_topic, names))
        for topic in names[:3]:
            client.subscribe(topic, "s", initial_position=magnetar.InitialPosition.Earliest).close()
    finally:
        client.close()
        admin.close()
    gzip = {"Accept-Encoding": "gzip"}
    started = time.monotonic()
    response = httpx.get(f"{url}/metrics", params={"namespace": namespace}, headers=gzip, timeout=120)
    seconds = time.monotonic() - started
    response.raise_for_status()
    requests: dict[str, int] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            if sample.name == "magnetar_scrape_aws_requests":
                requests[sample.labels["operation"]] = requests.get(sample.labels["operation"], 0) + int(sample.value)
    by_topic = httpx.get(f"{url}/metrics", params={"namespace": namespace, "topics": "true"}, headers=gzip,
                         timeout=120)
    by_topic.raise_for_status()
    return {"topics": topics, "requests": sum(requests.values()), "requests_by_operation": requests,
            "scrape_seconds": round(seconds, 1), "topic_level_plain_bytes": len(by_topic.content),
            "topic_level_gzip_bytes": by_topic.num_bytes_downloaded}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--url", help="an already running broker (default: start `magnetar local up`)")
    parser.add_argument("--json", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.url:
        result = measure(args.url, args.topics)
    else:
        with LocalUpProcess(maintenance_interval_s=0) as stack:
            result = measure(stack.url, args.topics)
    result["command"] = " ".join(["bench/metrics_scrape.py", *sys.argv[1:]])
    print(json.dumps(result, indent=2))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
