"""The web console in a real browser (headless Chromium driven by Playwright) against `magnetar
local up --auth` in its own process: sign in with a token, create a topic, produce with the SDK,
watch the rate move, peek the message decoded with its schema, clear a backlog, page and search a
namespace's topics, and a role without a grant refused."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

import magnetar
from magnetar import schema as ms
from magnetar.client.admin import AdminClient
from magnetar.local.cluster import LocalUpProcess
from magnetar.local.console import find_chromium
from magnetar.security.tokens import create_token, new_secret_key

playwright_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium (make install installs Debian's chromium)")

TENANT = f"console-{uuid.uuid4().hex[:6]}"
NS = f"{TENANT}/ns"
WAIT_MS = 15_000  # what a page may take to show what the API answers (stats polls every 3 s)


class Order(ms.Record):
    sku = ms.String()
    quantity = ms.Integer()


class Console:
    def __init__(self, proc: LocalUpProcess, key: bytes, browser: Any) -> None:
        self.url, self.key, self.browser = proc.url, key, browser

    def token(self, role: str) -> str:
        return create_token(role, secret_key=self.key)

    def client(self, role: str = "admin") -> magnetar.Client:
        return magnetar.Client(self.url, authentication=magnetar.AuthenticationToken(self.token(role)))

    def admin(self, role: str = "admin") -> AdminClient:
        return AdminClient(self.url, authentication=magnetar.AuthenticationToken(self.token(role)))

    def signed_in(self, role: str) -> Any:
        """A new page, signed in as `role` through the sign-in form."""
        page = self.browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{self.url}/console/")
        page.get_by_label("Token").fill(self.token(role))
        page.get_by_role("button", name="Sign in").click()
        page.get_by_text(f"Signed in as {role}").wait_for(timeout=WAIT_MS)
        return page

    def open(self, page: Any, route: str) -> None:
        page.goto(f"{self.url}/console/#/{route}")


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    key = new_secret_key()
    key_file = Path(tmp_path_factory.mktemp("console")) / "secret.key"
    key_file.write_bytes(key)
    with LocalUpProcess(maintenance_interval_s=0, extra_args=[
            "--auth", "--token-secret-key", str(key_file), "--superuser-role", "admin"]) as proc:
        with closing(AdminClient(proc.url, authentication=magnetar.AuthenticationToken(
                create_token("admin", secret_key=key)))) as admin:
            admin.create_tenant(TENANT, admin_roles=["alice"], allowed_clusters=["standalone"])
            admin.create_namespace(NS)
        with playwright_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            yield Console(proc, key, browser)
            browser.close()


def stat(page: Any, name: str) -> float:
    value = page.locator(f'[data-stat="{name}"]').get_attribute("data-value")
    return float(value or 0)


def eventually(check: Any, timeout_s: float = WAIT_MS / 1000) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "not within the wait"
        time.sleep(0.25)


def test_sign_in_create_a_topic_see_it_live_peek_it_decoded_and_clear_its_backlog(console: Console) -> None:
    page = console.signed_in("alice")  # the tenant's admin, not a superuser
    console.open(page, f"namespace/{TENANT}/ns")
    page.get_by_label("New topic").fill("orders")
    page.get_by_role("button", name="Create topic").click()
    page.get_by_text("Topic orders created").wait_for(timeout=WAIT_MS)
    page.get_by_role("link", name="orders", exact=True).click()
    page.get_by_role("heading", name="orders").wait_for(timeout=WAIT_MS)
    page.get_by_role("tab", name="Subscriptions").click()
    page.get_by_label("New subscription").fill("audit")
    page.get_by_label("Starting at").select_option("earliest")
    page.get_by_role("button", name="Create subscription").click()
    page.get_by_text("Subscription audit created").wait_for(timeout=WAIT_MS)

    topic = f"persistent://{NS}/orders"
    with closing(console.client("alice")) as client:
        producer = client.create_producer(topic, schema=ms.AvroSchema(Order))
        for i in range(30):
            producer.send(Order(sku=f"sku-{i}", quantity=i), partition_key=f"customer-{i % 3}",
                          properties={"origin": "console-test"})
        producer.close()

    page.get_by_role("tab", name="Overview").click()
    eventually(lambda: page.locator('[data-stat="msgInCounter"]').count() and stat(page, "msgInCounter") == 30)
    eventually(lambda: stat(page, "msgRateIn") > 0)  # the rate moved
    eventually(lambda: stat(page, "backlog") == 30)

    page.get_by_role("tab", name="Messages").click()
    page.get_by_label("Read", exact=True).select_option("subscription")
    page.get_by_role("button", name="Peek").click()
    first = page.locator("table.messages tbody tr").first
    first.wait_for(timeout=WAIT_MS)
    assert page.locator("table.messages tbody tr").count() == 10
    value = first.locator("pre.value")
    assert '"sku": "sku-0"' in value.inner_text() and value.get_attribute("data-schema") == "AVRO"
    assert "customer-0" in first.inner_text() and "origin" in first.inner_text()

    page.get_by_role("tab", name="Schema").click()
    assert page.locator("[data-schema-type]").inner_text(timeout=WAIT_MS) == "AVRO"

    page.get_by_role("tab", name="Subscriptions").click()
    row = page.locator('tr[data-subscription="audit"]')
    eventually(lambda: row.locator('[data-field="msgBacklog"]').inner_text() == "30")
    actions = page.get_by_role("group", name="Actions on audit")
    actions.get_by_role("button", name="Clear backlog").click()
    page.get_by_role("button", name="Yes, clear backlog").click()
    page.get_by_text("Backlog of audit cleared").wait_for(timeout=WAIT_MS)
    eventually(lambda: row.locator('[data-field="msgBacklog"]').inner_text() == "0")
    with closing(console.admin()) as admin:
        assert admin.topic_stats(topic)["subscriptions"]["audit"]["msgBacklog"] == 0
    page.close()


def test_topics_are_paged_and_searched_on_the_server(console: Console) -> None:
    with closing(console.admin()) as admin:
        for i in range(55):
            admin.create_topic(f"persistent://{NS}/bulk-{i:03d}")
    page = console.signed_in("admin")
    console.open(page, f"namespace/{TENANT}/ns")
    topics = page.get_by_role("list", name="Topics", exact=True)
    topics.locator("li").first.wait_for(timeout=WAIT_MS)
    assert topics.locator("li").count() == 50  # one page
    page.get_by_role("button", name="Next page").click()
    page.locator('[data-page="2"][aria-busy="false"]').wait_for(timeout=WAIT_MS)
    # the list shows the second page once it has rendered it (the busy flag may clear a frame sooner)
    eventually(lambda: "bulk-054" in (second := page.get_by_role("list", name="Topics", exact=True)
                                      .locator("li").all_inner_texts()) and "bulk-000" not in second)
    page.get_by_label("Search topics").fill("BULK-04")
    page.get_by_text("matching “BULK-04”").wait_for(timeout=WAIT_MS)
    eventually(lambda: page.get_by_role("list", name="Topics", exact=True).locator("li").all_inner_texts()
               == [f"bulk-04{i}" for i in range(10)])
    page.close()


def test_a_role_without_a_grant_is_refused(console: Console) -> None:
    page = console.signed_in("nobody")
    console.open(page, f"namespace/{TENANT}/ns")
    refusal = page.get_by_role("alert").first
    refusal.wait_for(timeout=WAIT_MS)
    assert "(403)" in refusal.inner_text()
    assert page.get_by_role("list", name="Topics", exact=True).count() == 0
    console.open(page, f"topic/persistent/{TENANT}/ns/orders/messages")
    page.get_by_role("button", name="Peek").click()
    page.get_by_role("alert").filter(has_text="403").first.wait_for(timeout=WAIT_MS)
    assert page.locator("table.messages").count() == 0
    page.close()
    anonymous = console.browser.new_page()
    anonymous.goto(f"{console.url}/console/")
    anonymous.get_by_role("heading", name="Sign in to Magnetar").wait_for(timeout=WAIT_MS)
    anonymous.get_by_label("Token").fill("not-a-token")
    anonymous.get_by_role("button", name="Sign in").click()
    anonymous.get_by_role("alert").first.wait_for(timeout=WAIT_MS)
    assert anonymous.get_by_text("Signed in as").count() == 0
    anonymous.close()


def test_a_topic_is_deleted_from_its_page(console: Console) -> None:
    topic = f"persistent://{NS}/doomed"
    with closing(console.client("alice")) as client:
        client.create_producer(topic).send(b"x")
        consumer = client.subscribe(topic, "busy")
        page = console.signed_in("alice")
        console.open(page, f"topic/persistent/{TENANT}/ns/doomed/overview")
        page.get_by_role("heading", name="doomed").wait_for(timeout=WAIT_MS)
        delete = page.get_by_role("group", name="Delete the topic")
        delete.get_by_role("button", name="Delete topic").click()
        page.get_by_role("button", name="Yes, delete topic").click()
        page.get_by_role("alert").filter(has_text="active producers/subscriptions").wait_for(timeout=WAIT_MS)
        consumer.close()
    delete.get_by_label("even while in use").check()
    delete.get_by_role("button", name="Delete topic").click()
    page.get_by_role("button", name="Yes, delete topic").click()
    page.wait_for_url(f"**/#/namespace/{TENANT}/ns", timeout=WAIT_MS)
    with closing(console.admin()) as admin:
        assert topic not in admin.topics(NS)
    page.close()
