// A topic's subscriptions with their consumers, backlog and redeliveries, and Pulsar Manager's
// actions on them: create, peek, skip, clear the backlog, reset the cursor, delete.
import { useState } from "preact/hooks";
import { api, enc, topicPath } from "../api.js";
import { ConfirmButton, Field, Outcome, Select, fmtNumber, html, link, useAction } from "../ui.js";

function subPath(topic, name) {
  return `/admin/v2/${topicPath(topic)}/subscription/${enc(name)}`;
}

function parseMessageId(text) {
  // ledger:entry, or a message id as the console shows it (ledger:entry:partition:batch)
  const parts = text.trim().split(":").map(Number);
  if (parts.length < 2 || parts.some((n) => !Number.isInteger(n)) || parts[0] < 0 || parts[1] < 0) return null;
  return { ledgerId: parts[0], entryId: parts[1], partitionIndex: parts.length > 2 && parts[2] >= 0 ? parts[2] : -1 };
}

function SubscriptionActions({ topic, name, partitions, run, busy }) {
  const [count, setCount] = useState("1");
  const [when, setWhen] = useState("");
  const [messageId, setMessageId] = useState("");
  const [force, setForce] = useState(false);
  const path = subPath(topic, name);
  const resetByTime = (event) => {
    event.preventDefault();
    const ms = Date.parse(when);
    if (Number.isNaN(ms)) return;
    run(() => api("POST", `${path}/resetcursor/${ms}`), `${name} reset to ${new Date(ms).toISOString()}`);
  };
  const resetById = (event) => {
    event.preventDefault();
    const id = parseMessageId(messageId);
    if (!id) {
      run(() => Promise.reject(new Error("A message id is ledger:entry (or ledger:entry:partition:batch)")), "");
      return;
    }
    run(() => api("POST", `${path}/resetcursor`, { body: id }), `${name} reset to ${messageId}`);
  };
  return html`<div class="actions" role="group" aria-label=${`Actions on ${name}`}>
    <a class="button" href=${link("topic", topic.domain, topic.tenant, topic.namespace, topic.name, "messages", name)}>Peek</a>
    ${partitions === 0 && html`<form class="inline" onSubmit=${(e) => { e.preventDefault();
        run(() => api("POST", `${path}/skip/${Number(count)}`), `Skipped ${count} on ${name}`); }}>
      <${Field} label="Entries to skip" type="number" min="1" value=${count} onValue=${setCount} />
      <button type="submit" disabled=${busy}>Skip</button>
    </form>`}
    <${ConfirmButton} label="Clear backlog" disabled=${busy}
      onConfirm=${() => run(() => api("POST", `${path}/skip_all`), `Backlog of ${name} cleared`)} />
    <form class="inline" onSubmit=${resetByTime}>
      <${Field} label="Reset to time" type="datetime-local" step="1" value=${when} onValue=${setWhen} required />
      <button type="submit" disabled=${busy}>Reset</button>
    </form>
    ${partitions === 0 && html`<form class="inline" onSubmit=${resetById}>
      <${Field} label="Reset to message id" value=${messageId} onValue=${setMessageId} placeholder="ledger:entry" required />
      <button type="submit" disabled=${busy}>Reset</button>
    </form>`}
    <label class="check"><input type="checkbox" checked=${force} onChange=${() => setForce(!force)} /> even with consumers</label>
    <${ConfirmButton} label="Delete subscription" disabled=${busy}
      onConfirm=${() => run(() => api("DELETE", path, { query: force ? { force: true } : {} }), `Subscription ${name} deleted`)} />
  </div>`;
}

function CreateSubscription({ topic, run, busy }) {
  const [name, setName] = useState("");
  const [position, setPosition] = useState("latest");
  const create = (event) => {
    event.preventDefault();
    const body = position === "earliest" ? { ledgerId: -1, entryId: -1 } : undefined;
    run(() => api("PUT", subPath(topic, name.trim()), { body }), `Subscription ${name} created`);
  };
  return html`<form class="inline" onSubmit=${create} aria-label="Create a subscription">
    <${Field} label="New subscription" value=${name} onValue=${setName} required />
    <${Select} label="Starting at" value=${position} onValue=${setPosition}
      options=${[["latest", "the end (new messages only)"], ["earliest", "the earliest message kept"]]} />
    <button type="submit" disabled=${busy}>Create subscription</button>
  </form>`;
}

export function SubscriptionsPanel({ topic, stats, partitions }) {
  const { outcome, busy, run } = useAction();
  const subscriptions = Object.entries((stats && stats.subscriptions) || {});
  return html`<section aria-labelledby="subs-heading">
    <h2 id="subs-heading">Subscriptions</h2>
    <${Outcome} outcome=${outcome} />
    ${stats && !subscriptions.length && html`<p class="muted">No subscriptions.</p>`}
    ${subscriptions.length > 0 && html`<table class="subs">
      <caption class="sr-only">Subscriptions, refreshed every few seconds</caption>
      <thead><tr>
        <th scope="col">Subscription</th><th scope="col">Type</th><th scope="col">Backlog</th>
        <th scope="col">Unacked</th><th scope="col">Rate out (msg/s)</th><th scope="col">Redeliveries (msg/s)</th>
        <th scope="col">Consumers</th>
      </tr></thead>
      <tbody>${subscriptions.map(([name, s]) => html`<tr data-subscription=${name}>
        <th scope="row">${name}</th><td>${s.type}</td>
        <td data-field="msgBacklog">${fmtNumber(s.msgBacklog)}</td><td>${fmtNumber(s.unackedMessages)}</td>
        <td>${fmtNumber(s.msgRateOut, 2)}</td><td>${fmtNumber(s.msgRateRedeliver, 2)}</td>
        <td><details><summary>${s.consumers.length} consumer${s.consumers.length === 1 ? "" : "s"}</summary>
          <ul>${s.consumers.map((c) => html`<li>${c.consumerName}: ${fmtNumber(c.unackedMessages)} unacked${
            c.connectedSince ? `, since ${c.connectedSince}` : ""}</li>`)}</ul>
        </details></td>
      </tr><tr class="row-actions"><td colspan="7">
        <${SubscriptionActions} topic=${topic} name=${name} partitions=${partitions} run=${run} busy=${busy} />
      </td></tr>`)}</tbody>
    </table>`}
    <${CreateSubscription} topic=${topic} run=${run} busy=${busy} />
  </section>`;
}
