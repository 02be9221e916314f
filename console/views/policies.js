// Retention, message TTL, backlog quota and rates of a namespace or a topic (the same admin
// paths below each: `<base>/retention`, `<base>/messageTTL`...). A topic's own setting wins over
// its namespace's; removing it brings the namespace's back.
import { useEffect, useState } from "preact/hooks";
import { api } from "../api.js";
import { ConfirmButton, ErrorNote, Field, Loading, Outcome, Select, html, useAction, useLoad } from "../ui.js";

const POLICIES = [
  {
    path: "retention", title: "Retention",
    help: "How long and how much acknowledged data is kept (-1: no limit).",
    fields: [["retentionTimeInMinutes", "Time (minutes)", "0"], ["retentionSizeInMB", "Size (MB)", "0"]],
    toForm: (v) => v, toBody: (f) => ({ retentionTimeInMinutes: Number(f.retentionTimeInMinutes),
                                         retentionSizeInMB: Number(f.retentionSizeInMB) }),
  },
  {
    path: "messageTTL", title: "Message TTL",
    help: "Unacknowledged messages older than this are acknowledged for every subscription (0: never).",
    fields: [["ttl", "TTL (seconds)", "0"]],
    toForm: (v) => ({ ttl: v }), toBody: (f) => Number(f.ttl),
  },
  {
    path: "backlogQuota", title: "Backlog quota",
    help: "The most a subscription's backlog may hold before the policy applies (-1: no limit).",
    fields: [["limitSize", "Size (bytes)", "-1"], ["limitTime", "Age (seconds)", "-1"]],
    choice: ["policy", "When exceeded", [["producer_request_hold", "Hold producers"],
      ["producer_exception", "Refuse producers"], ["consumer_backlog_eviction", "Evict the oldest backlog"]],
      "producer_request_hold"],
    toForm: (v) => v.destination_storage || v.message_age || null,
    toBody: (f) => ({ limitSize: Number(f.limitSize), limitTime: Number(f.limitTime), policy: f.policy }),
  },
  {
    path: "publishRate", title: "Publish rate",
    help: "What each topic partition accepts per second (-1: no limit).",
    fields: [["publishThrottlingRateInMsg", "Messages / s", "-1"], ["publishThrottlingRateInByte", "Bytes / s", "-1"]],
    toForm: (v) => v, toBody: (f) => ({ publishThrottlingRateInMsg: Number(f.publishThrottlingRateInMsg),
                                         publishThrottlingRateInByte: Number(f.publishThrottlingRateInByte) }),
  },
  {
    path: "dispatchRate", title: "Dispatch rate",
    help: "What each subscription is handed per period (-1: no limit).",
    fields: [["dispatchThrottlingRateInMsg", "Messages", "-1"], ["dispatchThrottlingRateInByte", "Bytes", "-1"],
             ["ratePeriodInSecond", "Period (seconds)", "1"]],
    toForm: (v) => v, toBody: (f) => ({ dispatchThrottlingRateInMsg: Number(f.dispatchThrottlingRateInMsg),
      dispatchThrottlingRateInByte: Number(f.dispatchThrottlingRateInByte), ratePeriodInSecond: Number(f.ratePeriodInSecond) }),
  },
];

function emptyForm(policy) {
  const form = Object.fromEntries(policy.fields.map(([name, , initial]) => [name, initial]));
  if (policy.choice) form[policy.choice[0]] = policy.choice[3];
  return form;
}

function shown(value) {
  if (value === null || value === undefined || (typeof value === "object" && !Object.keys(value).length)) {
    return "not set";
  }
  return typeof value === "object" ? JSON.stringify(value) : String(value);
}

function PolicyCard({ base, policy }) {
  const current = useLoad(() => api("GET", `${base}/${policy.path}`), [base, policy.path]);
  const [form, setForm] = useState(emptyForm(policy));
  const { outcome, busy, run } = useAction();
  useEffect(() => {
    const filled = current.data !== undefined && current.data !== null && policy.toForm(current.data);
    setForm(filled ? { ...emptyForm(policy), ...Object.fromEntries(Object.entries(filled).map(([k, v]) => [k, String(v)])) }
      : emptyForm(policy));
  }, [current.data]);
  const save = (event) => {
    event.preventDefault();
    run(() => api("POST", `${base}/${policy.path}`, { body: policy.toBody(form) }), `${policy.title} saved`, current.reload);
  };
  const headingId = `policy-${policy.path}`;
  return html`<section class="card" aria-labelledby=${headingId}>
    <h3 id=${headingId}>${policy.title}</h3>
    <p class="muted">${policy.help}</p>
    ${current.loading && html`<${Loading} />`}
    <${ErrorNote} error=${current.error} />
    ${!current.error && !current.loading && html`<p>Now: <code data-policy=${policy.path}>${shown(current.data)}</code></p>`}
    <form onSubmit=${save} aria-label=${`Set ${policy.title.toLowerCase()}`}>
      ${policy.fields.map(([name, label]) => html`<${Field} label=${label} type="number" value=${form[name]}
        onValue=${(v) => setForm({ ...form, [name]: v })} />`)}
      ${policy.choice && html`<${Select} label=${policy.choice[1]} value=${form[policy.choice[0]]}
        options=${policy.choice[2]} onValue=${(v) => setForm({ ...form, [policy.choice[0]]: v })} />`}
      <button type="submit" class="primary" disabled=${busy}>Save</button>
      <${ConfirmButton} label="Remove" disabled=${busy}
        onConfirm=${() => run(() => api("DELETE", `${base}/${policy.path}`), `${policy.title} removed`, current.reload)} />
    </form>
    <${Outcome} outcome=${outcome} />
  </section>`;
}

export function PoliciesEditor({ base, level }) {
  return html`<div>
    <p class="muted">${level === "topic"
      ? "Set here, a policy applies to this topic only and wins over its namespace's."
      : "A namespace's policies apply to each of its topics that sets none of its own."}</p>
    <div class="grid">${POLICIES.map((policy) => html`<${PolicyCard} base=${base} policy=${policy} />`)}</div>
  </div>`;
}
