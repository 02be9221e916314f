// Peek and browse a topic's messages, decoded with the topic's schema: a subscription's backlog
// (from its first unacknowledged entry), the latest messages, the earliest kept, or from a message id.
// Reads go through the reader API; nothing is acknowledged.
import { useEffect, useState } from "preact/hooks";
import { api, topicPath } from "../api.js";
import { ErrorNote, Field, Loading, Select, fmtTime, html } from "../ui.js";

function partitionTopic(topic, partitions, index) {
  return partitions > 0 ? { ...topic, name: `${topic.name}-partition-${index}` } : topic;
}

function entryOf(position) {
  const entry = Number(String(position).split(":")[1]);
  return Number.isInteger(entry) ? entry : -1;
}

async function startOf(target, source, subscription, count, messageId) {
  if (source === "earliest") return 0;
  if (source === "latest") {
    const last = await api("GET", `/admin/v2/${topicPath(target)}/lastMessageId`);
    return Math.max(0, last.entryId - count + 1);
  }
  if (source === "id") {
    const entry = entryOf(messageId);
    if (entry < 0) throw new Error("A message id is ledger:entry");
    return entry;
  }
  const internal = await api("GET", `/admin/v2/${topicPath(target)}/internalStats`);
  const cursor = (internal.cursors || {})[subscription];
  if (!cursor) throw new Error(`No subscription ${subscription} on ${target.name}`);
  return entryOf(cursor.markDeletePosition) + 1;  // the first entry not acknowledged
}

function decoded(message) {
  if (message.value !== undefined && message.value !== null) {
    return typeof message.value === "string" ? message.value : JSON.stringify(message.value, null, 2);
  }
  if (message.valueError) return `(not a ${message.schemaType} value: ${message.valueError})`;
  if (message.nullValue) return "(null value)";
  if (message.encryptionContext) return "(encrypted)";
  try {
    const bytes = Uint8Array.from(atob(message.payload), (c) => c.charCodeAt(0));
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch (_) {
    return `(base64) ${message.payload}`;
  }
}

function MessageTable({ messages }) {
  if (!messages.length) return html`<p class="muted">No messages there.</p>`;
  return html`<table class="messages">
    <caption class="sr-only">Messages read, oldest first</caption>
    <thead><tr><th scope="col">Message id</th><th scope="col">Key</th><th scope="col">Published</th>
      <th scope="col">Event time</th><th scope="col">Properties</th><th scope="col">Value</th></tr></thead>
    <tbody>${messages.map((m) => html`<tr data-message-id=${m.messageId}>
      <th scope="row"><code>${m.messageId}</code></th>
      <td>${m.key ?? ""}</td>
      <td>${fmtTime(m.publishTime)}</td>
      <td>${m.eventTime ? fmtTime(m.eventTime) : "–"}</td>
      <td>${Object.entries(m.properties || {}).map(([k, v]) => html`<div><code>${k}</code>=${v}</div>`)}</td>
      <td><pre class="value" data-schema=${m.schemaType || ""}>${decoded(m)}</pre>
        ${m.schemaType && html`<small class="muted">${m.schemaType}${m.schemaVersion !== undefined ? ` v${m.schemaVersion}` : ""}</small>`}</td>
    </tr>`)}</tbody>
  </table>`;
}

export function MessagesPanel({ topic, stats, partitions, subscription }) {
  const names = Object.keys((stats && stats.subscriptions) || {});
  const [source, setSource] = useState(subscription ? "subscription" : "latest");
  const [chosen, setChosen] = useState(subscription || "");
  const [count, setCount] = useState("10");
  const [partition, setPartition] = useState("0");
  const [messageId, setMessageId] = useState("");
  const [result, setResult] = useState({ loading: false, error: null, messages: null });
  const sub = chosen || names[0] || "";
  const peek = async (event) => {
    event?.preventDefault();
    const n = Math.min(100, Math.max(1, Number(count) || 10));
    const target = partitionTopic(topic, partitions, Number(partition));
    setResult({ loading: true, error: null, messages: null });
    try {
      const start = await startOf(target, source, sub, n, messageId);
      const read = await api("POST", `/magnetar/v1/reader/${topicPath(target)}/read`,
        { body: { startEntryId: start, maxEntries: n, format: "messages", decode: true } });
      setResult({ loading: false, error: null, messages: read.messages || [] });
    } catch (error) {
      setResult({ loading: false, error, messages: null });
    }
  };
  useEffect(() => { if (subscription) peek(); }, [subscription]);
  const sources = [["latest", "The latest messages"], ["earliest", "From the earliest kept"],
                   ["subscription", "A subscription's backlog (peek)"], ["id", "From a message id"]];
  return html`<section aria-labelledby="messages-heading">
    <h2 id="messages-heading">Messages</h2>
    <form class="inline" onSubmit=${peek} aria-label="Read messages">
      <${Select} label="Read" value=${source} onValue=${setSource} options=${sources} />
      ${source === "subscription" && html`<${Select} label="Subscription" value=${sub} onValue=${setChosen}
        options=${names.map((n) => [n, n])} />`}
      ${source === "id" && html`<${Field} label="Message id" value=${messageId} onValue=${setMessageId} placeholder="ledger:entry" />`}
      ${partitions > 0 && html`<${Select} label="Partition" value=${partition} onValue=${setPartition}
        options=${Array.from({ length: partitions }, (_, i) => [String(i), String(i)])} />`}
      <${Field} label="Entries" type="number" min="1" max="100" value=${count} onValue=${setCount} />
      <button type="submit" class="primary" disabled=${result.loading}>Peek</button>
    </form>
    ${result.loading && html`<${Loading} what="messages" />`}
    <${ErrorNote} error=${result.error} />
    ${result.messages && html`<${MessageTable} messages=${result.messages} />`}
  </section>`;
}
