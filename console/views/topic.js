// A topic: live stats and charts, subscriptions, messages, schema, policies and permissions.
import { useState } from "preact/hooks";
import { api, topicPath } from "../api.js";
import { ConfirmButton, ErrorNote, Loading, Outcome, TabPanel, Tabs, fmtBytes, fmtNumber, html, link, useAction, useLoad,
  usePoll } from "../ui.js";
import { Chart } from "./chart.js";
import { MessagesPanel } from "./messages.js";
import { PermissionsEditor } from "./permissions.js";
import { PoliciesEditor } from "./policies.js";
import { SchemaPanel } from "./schema.js";
import { SubscriptionsPanel } from "./subscriptions.js";

export const POLL_MS = 3000;  // stats are read again this often
const KEPT_POINTS = 120;  // six minutes of points

function backlogOf(stats) {
  return Object.values(stats.subscriptions || {}).reduce((sum, s) => sum + (s.msgBacklog || 0), 0);
}

// Stats read every few seconds while the page is open, and the series the charts draw.
function useTopicStats(topic, partitions) {
  const [state, setState] = useState({ stats: null, error: null, points: [] });
  usePoll(async () => {
    if (partitions === undefined) return;
    const path = partitions > 0 ? `/admin/v2/${topicPath(topic)}/partitioned-stats` : `/admin/v2/${topicPath(topic)}/stats`;
    try {
      const stats = await api("GET", path, { query: partitions > 0 ? { perPartition: false } : {} });
      const point = { t: Date.now(), values: [stats.msgRateIn, stats.msgRateOut, backlogOf(stats)] };
      setState((s) => ({ stats, error: null, points: [...s.points, point].slice(-KEPT_POINTS) }));
    } catch (error) {
      setState((s) => ({ ...s, error }));
    }
  }, POLL_MS, [topic.full, partitions]);
  return state;
}

function Figure({ name, label, value, shown }) {
  return html`<div class="figure" data-stat=${name} data-value=${value}>
    <dt>${label}</dt><dd>${shown}</dd>
  </div>`;
}

function Overview({ stats, points }) {
  if (!stats) return html`<${Loading} what="stats" />`;
  return html`<div>
    <dl class="figures">
      <${Figure} name="msgRateIn" label="Rate in (msg/s)" value=${stats.msgRateIn} shown=${fmtNumber(stats.msgRateIn, 2)} />
      <${Figure} name="msgRateOut" label="Rate out (msg/s)" value=${stats.msgRateOut} shown=${fmtNumber(stats.msgRateOut, 2)} />
      <${Figure} name="msgThroughputIn" label="Throughput in" value=${stats.msgThroughputIn} shown=${`${fmtBytes(stats.msgThroughputIn)}/s`} />
      <${Figure} name="backlog" label="Backlog (entries)" value=${backlogOf(stats)} shown=${fmtNumber(backlogOf(stats))} />
      <${Figure} name="msgInCounter" label="Messages in" value=${stats.msgInCounter} shown=${fmtNumber(stats.msgInCounter)} />
      <${Figure} name="storageSize" label="Storage" value=${stats.storageSize} shown=${fmtBytes(stats.storageSize)} />
    </dl>
    <div class="charts">
      <${Chart} title="Message rates (msg/s)" series=${["in", "out"]} points=${points.map((p) => ({ t: p.t, values: p.values.slice(0, 2) }))} />
      <${Chart} title="Backlog (entries)" series=${["backlog"]} points=${points.map((p) => ({ t: p.t, values: [p.values[2]] }))} />
    </div>
    <h2>Producers</h2>
    ${(stats.publishers || []).length ? html`<table>
      <caption class="sr-only">Producers that published or connected lately</caption>
      <thead><tr><th scope="col">Producer</th><th scope="col">Messages</th><th scope="col">Bytes</th><th scope="col">Since</th></tr></thead>
      <tbody>${stats.publishers.map((p) => html`<tr><th scope="row">${p.producerName}</th><td>${fmtNumber(p.msgInCounter)}</td>
        <td>${fmtBytes(p.bytesInCounter)}</td><td>${p.connectedSince}</td></tr>`)}</tbody>
    </table>` : html`<p class="muted">No producer lately.</p>`}
  </div>`;
}

const TABS = [
  { id: "overview", label: "Overview" }, { id: "subscriptions", label: "Subscriptions" },
  { id: "messages", label: "Messages" }, { id: "schema", label: "Schema" },
  { id: "policies", label: "Policies" }, { id: "permissions", label: "Permissions" },
];

// Pulsar's delete (every partition of a partitioned topic): refused (412) while producers or
// consumers are active, unless forced; the namespace's page follows a success.
function DeleteTopic({ topic, partitions }) {
  const { outcome, busy, run } = useAction();
  const [force, setForce] = useState(false);
  const path = `/admin/v2/${topicPath(topic)}${partitions > 0 ? "/partitions" : ""}`;
  const done = () => { window.location.hash = link("namespace", topic.tenant, topic.namespace); };
  return html`<div class="actions" role="group" aria-label="Delete the topic">
    <label class="check"><input type="checkbox" checked=${force} onChange=${() => setForce(!force)} /> even while in use</label>
    <${ConfirmButton} label="Delete topic" disabled=${busy || partitions === undefined}
      onConfirm=${() => run(() => api("DELETE", path, { query: force ? { force: true } : {} }), `Topic ${topic.name} deleted`, done)} />
    <${Outcome} outcome=${outcome} />
  </div>`;
}

export function TopicPage({ topic, tab, subscription }) {
  const meta = useLoad(() => api("GET", `/admin/v2/${topicPath(topic)}/partitions`), [topic.full]);
  const partitions = meta.data ? meta.data.partitions : meta.error ? 0 : undefined;
  const { stats, error, points } = useTopicStats(topic, partitions);
  const select = (id) => { window.location.hash = link("topic", topic.domain, topic.tenant, topic.namespace, topic.name, id); };
  const base = `/admin/v2/${topicPath(topic)}`;
  return html`<section>
    <h1 tabindex="-1">${topic.name}</h1>
    <p class="muted"><code>${topic.full}</code>${partitions > 0 ? ` · ${partitions} partitions` : ""}</p>
    <${DeleteTopic} topic=${topic} partitions=${partitions} />
    <${ErrorNote} error=${error} />
    <${Tabs} label="Topic" tabs=${TABS} selected=${tab} onSelect=${select} />
    <${TabPanel} id=${tab}>
      ${tab === "overview" && html`<${Overview} stats=${stats} points=${points} />`}
      ${tab === "subscriptions" && html`<${SubscriptionsPanel} topic=${topic} stats=${stats} partitions=${partitions || 0} />`}
      ${tab === "messages" && html`<${MessagesPanel} topic=${topic} stats=${stats} partitions=${partitions || 0}
        subscription=${subscription} />`}
      ${tab === "schema" && html`<${SchemaPanel} topic=${topic} />`}
      ${tab === "policies" && html`<${PoliciesEditor} base=${base} level="topic" />`}
      ${tab === "permissions" && html`<${PermissionsEditor} base=${base} />`}
    <//>
  </section>`;
}
