"""Screenshots of the web console's main pages into docs/img/ (docs/console.md shows them).

Starts `magnetar local up --auth` on free ports, makes a tenant with a few topics, produces typed
messages (Avro) while a consumer reads part of them, and photographs the pages in headless
Chromium (Debian's, driven by Playwright): `make screenshots`, or
`python scripts/console_screenshots.py [--out docs/img]`.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from contextlib import closing, suppress
from pathlib import Path

import magnetar
from magnetar import schema as ms
from magnetar.client.admin import AdminClient
from magnetar.local.cluster import LocalUpProcess
from magnetar.local.console import find_chromium
from magnetar.security.tokens import create_token, new_secret_key

ROOT = Path(__file__).resolve().parent.parent
TENANT, NAMESPACE = "acme", "shop"
VIEWPORT = {"width": 1280, "height": 860}


class Order(ms.Record):
    sku = ms.String()
    quantity = ms.Integer()
    customer = ms.String()


def traffic(url: str, token: str, stop: threading.Event) -> None:
    """~25 messages a second to `orders`, a consumer of `billing` reading about half of them."""
    topic = f"persistent://{TENANT}/{NAMESPACE}/orders"
    auth = magnetar.AuthenticationToken(token)
    with closing(magnetar.Client(url, authentication=auth)) as client:
        producer = client.create_producer(topic, schema=ms.AvroSchema(Order), batching_enabled=False)
        consumer = client.subscribe(topic, "billing", schema=ms.AvroSchema(Order),
                                    consumer_type=magnetar.ConsumerType.Shared)
        i = 0
        while not stop.is_set():
            producer.send(Order(sku=f"SKU-{1000 + i % 37}", quantity=1 + i % 5, customer=f"c-{i % 11}"),
                          partition_key=f"c-{i % 11}", properties={"channel": "web" if i % 3 else "app"})
            if i % 2 == 0:
                with suppress(magnetar.Timeout):
                    consumer.acknowledge(consumer.receive(timeout_millis=200))
            i += 1
            time.sleep(0.04)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    args = parser.parse_args()
    chromium = find_chromium()
    if chromium is None:
        raise SystemExit("no Chromium on the PATH (make browser installs Debian's)")
    args.out.mkdir(parents=True, exist_ok=True)
    key = new_secret_key()
    with tempfile.TemporaryDirectory() as tmp:
        key_file = Path(tmp) / "secret.key"
        key_file.write_bytes(key)
        with LocalUpProcess(maintenance_interval_s=0, extra_args=[
                "--auth", "--token-secret-key", str(key_file), "--superuser-role", "admin"]) as proc:
            token = create_token("admin", secret_key=key)
            with closing(AdminClient(proc.url, authentication=magnetar.AuthenticationToken(token))) as admin:
                admin.create_tenant(TENANT, admin_roles=["shop-admin"], allowed_clusters=["standalone"])
                admin.create_namespace(f"{TENANT}/{NAMESPACE}")
                for name in ("orders", "payments", "refunds", "inventory-events", "shipping-labels", "audit-log"):
                    admin.create_topic(f"persistent://{TENANT}/{NAMESPACE}/{name}")
                admin.create_partitioned_topic(f"persistent://{TENANT}/{NAMESPACE}/clickstream", 4)
                admin.grant_permission_on_namespace(f"{TENANT}/{NAMESPACE}", "analytics", ["consume"])
            stop = threading.Event()
            producer = threading.Thread(target=traffic, args=(proc.url, token, stop), daemon=True)
            producer.start()
            try:
                shoot(proc.url, token, chromium, args.out)
            finally:
                stop.set()
                producer.join(timeout=10)
    return 0


def shoot(url: str, token: str, chromium: str, out: Path) -> None:
    from playwright.sync_api import sync_playwright

    topic = f"#/topic/persistent/{TENANT}/{NAMESPACE}/orders"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport=VIEWPORT)
        page.goto(f"{url}/console/")
        page.get_by_label("Token").fill(token)
        page.screenshot(path=str(out / "console-sign-in.png"))
        page.get_by_role("button", name="Sign in").click()
        page.get_by_text("Signed in as admin").wait_for()
        page.goto(f"{url}/console/#/namespace/{TENANT}/{NAMESPACE}")
        page.get_by_role("list", name="Topics", exact=True).wait_for()
        page.screenshot(path=str(out / "console-namespace.png"))
        page.goto(f"{url}/console/{topic}")
        page.locator('[data-stat="msgRateIn"]').wait_for()
        time.sleep(20)  # a few polls: the charts draw their lines
        page.screenshot(path=str(out / "console-topic.png"))
        page.goto(f"{url}/console/{topic}/subscriptions")
        page.locator('tr[data-subscription="billing"]').wait_for()
        page.locator('tr[data-subscription="billing"] details summary').click()
        page.screenshot(path=str(out / "console-subscriptions.png"))
        page.goto(f"{url}/console/{topic}/messages/billing")
        page.locator("table.messages tbody tr").first.wait_for()
        page.screenshot(path=str(out / "console-messages.png"))
        page.goto(f"{url}/console/{topic}/policies")
        page.locator('[data-policy="retention"]').wait_for()
        page.screenshot(path=str(out / "console-policies.png"))
        browser.close()


if __name__ == "__main__":
    raise SystemExit(main())
