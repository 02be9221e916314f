// A topic's schema: every version since its last delete, each one's definition.
import { useState } from "preact/hooks";
import { api, enc } from "../api.js";
import { ErrorNote, Loading, Select, fmtTime, html, useLoad } from "../ui.js";

function pretty(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch (_) {
    return text;
  }
}

export function SchemaPanel({ topic }) {
  const base = topic.name.replace(/-partition-\d+$/, "");
  const versions = useLoad(async () => {
    try {
      const all = await api("GET", `/admin/v2/schemas/${enc(topic.tenant)}/${enc(topic.namespace)}/${enc(base)}/schemas`);
      return all.getSchemaResponses || [];
    } catch (error) {
      if (error.status === 404) return [];
      throw error;
    }
  }, [topic.full]);
  const [chosen, setChosen] = useState("");
  const list = versions.data || [];
  const shown = list.find((v) => String(v.version) === chosen) || list[list.length - 1];
  return html`<section aria-labelledby="schema-heading">
    <h2 id="schema-heading">Schema</h2>
    ${versions.loading && html`<${Loading} what="schema" />`}
    <${ErrorNote} error=${versions.error} />
    ${versions.data && !list.length && html`<p class="muted">No schema: messages are plain bytes.</p>`}
    ${shown && html`<div>
      <${Select} label="Version" value=${String(shown.version)} onValue=${setChosen}
        options=${list.map((v) => [String(v.version), `v${v.version} · ${v.type} · ${fmtTime(v.timestamp)}`])} />
      <p>Type <strong data-schema-type>${shown.type}</strong>, version ${shown.version} of ${list.length}</p>
      ${shown.data && html`<pre class="value" aria-label="Schema definition">${pretty(shown.data)}</pre>`}
      ${Object.keys(shown.properties || {}).length > 0 && html`<p>Properties: <code>${JSON.stringify(shown.properties)}</code></p>`}
    </div>`}
  </section>`;
}
