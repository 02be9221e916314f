"""Topic patterns (regex subscriptions): the namespace a pattern names and the topics it lists,
by the domains pulsar-client's `regex_subscription_mode` picks."""

from __future__ import annotations

import re

from magnetar.client.transport import Transport
from magnetar.client.types import RegexSubscriptionMode
from magnetar.core.naming import NamespaceName, TopicName


def pattern_namespace(regex: re.Pattern[str]) -> NamespaceName:
    text = regex.pattern.split("://", 1)[-1]
    parts = text.split("/")
    if len(parts) < 3:
        return NamespaceName("public", "default")
    return NamespaceName.parse("/".join(parts[:2]))


def namespace_topics(transport: Transport, namespace: NamespaceName,
                     mode: RegexSubscriptionMode = RegexSubscriptionMode.PersistentOnly) -> list[str]:
    """The namespace's topics of the domains `mode` names, a partitioned topic by its base name."""
    domains = {RegexSubscriptionMode.PersistentOnly: ("persistent",),
               RegexSubscriptionMode.NonPersistentOnly: ("non-persistent",),
               RegexSubscriptionMode.AllTopics: ("persistent", "non-persistent")}[mode]
    plain: list[str] = []
    for domain in domains:
        plain += transport.call("GET", f"/admin/v2/{domain}/{namespace}")
    partitioned: list[str] = transport.call("GET", f"/admin/v2/persistent/{namespace}/partitioned")
    bases = {t for t in partitioned if t.split("://", 1)[0] in domains}
    return sorted(bases | {t for t in plain if TopicName.parse(t).partitioned_topic.__str__() not in bases})


def without_domain(regex: re.Pattern[str]) -> re.Pattern[str]:
    """Pulsar matches a topic pattern without its domain: the mode, not the prefix, picks domains."""
    text = regex.pattern
    for prefix in ("persistent://", "non-persistent://", "persistent:\\/\\/", "non-persistent:\\/\\/"):
        if text.startswith(prefix):
            return re.compile(text[len(prefix):], regex.flags)
    return regex
