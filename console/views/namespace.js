// A namespace: its topics (searched and paged on the server), its policies and its permissions.
import { useEffect, useState } from "preact/hooks";
import { api, enc, parseTopic } from "../api.js";
import { ErrorNote, Field, Loading, Outcome, Select, TabPanel, Tabs, html, link, useAction, useLoad } from "../ui.js";
import { PoliciesEditor } from "./policies.js";
import { PermissionsEditor } from "./permissions.js";

export const PAGE_SIZE = 50;

function topicLink(full) {
  const t = parseTopic(full);
  return link("topic", t.domain, t.tenant, t.namespace, t.name);
}

function TopicList({ tenant, namespace }) {
  const [search, setSearch] = useState("");
  const [query, setQuery] = useState("");
  const [domain, setDomain] = useState("persistent");
  const [starts, setStarts] = useState([""]);  // startAfter of each page shown so far
  useEffect(() => {  // search as the user types, once they pause (from the first page)
    if (search.trim() === query) return undefined;
    const timer = setTimeout(() => { setQuery(search.trim()); setStarts([""]); }, 300);
    return () => clearTimeout(timer);
  }, [search]);
  const start = starts[starts.length - 1];
  const page = useLoad(() => api("GET", `/admin/v2/${domain}/${enc(tenant)}/${enc(namespace)}`,
    { query: { limit: PAGE_SIZE, startAfter: start, search: query } }), [tenant, namespace, domain, query, start]);
  const partitioned = useLoad(() => api("GET", `/admin/v2/${domain}/${enc(tenant)}/${enc(namespace)}/partitioned`),
    [tenant, namespace, domain]);
  const names = page.data || [];
  const shownPartitioned = (partitioned.data || []).filter((t) => !query || t.toLowerCase().includes(query.toLowerCase()));
  return html`<section aria-labelledby="topics-heading">
    <h2 id="topics-heading">Topics</h2>
    <div class="inline">
      <${Field} label="Search topics" type="search" value=${search} onValue=${setSearch}
        hint="Matches any part of the name, in any case; searched on the server" />
      <${Select} label="Domain" value=${domain} onValue=${(d) => { setDomain(d); setStarts([""]); }}
        options=${[["persistent", "persistent"], ["non-persistent", "non-persistent"]]} />
    </div>
    ${shownPartitioned.length > 0 && html`<h3>Partitioned topics</h3>
      <ul class="topics" aria-label="Partitioned topics">
        ${shownPartitioned.map((t) => html`<li><a href=${topicLink(t)}>${parseTopic(t).name}</a></li>`)}
      </ul>`}
    <h3>Topics ${query && html`matching “${query}”`}</h3>
    ${page.loading && html`<${Loading} what="topics" />`}
    <${ErrorNote} error=${page.error} />
    ${page.data && (names.length
      ? html`<ul class="topics" aria-label="Topics" data-page=${starts.length} aria-busy=${page.loading ? "true" : "false"}>
          ${names.map((t) => html`<li><a href=${topicLink(t)}>${parseTopic(t)?.name || t}</a></li>`)}
        </ul>`
      : html`<p class="muted">No topics${query ? " match" : " yet"}.</p>`)}
    <nav class="pager" aria-label="Topic pages">
      <button disabled=${starts.length === 1} onClick=${() => setStarts(starts.slice(0, -1))}>Previous page</button>
      <span>Page ${starts.length}</span>
      <button disabled=${names.length < PAGE_SIZE} onClick=${() => setStarts([...starts, names[names.length - 1]])}>Next page</button>
    </nav>
    <${CreateTopic} tenant=${tenant} namespace=${namespace} onCreated=${() => { page.reload(); partitioned.reload(); }} />
  </section>`;
}

function CreateTopic({ tenant, namespace, onCreated }) {
  const [name, setName] = useState("");
  const [partitions, setPartitions] = useState("0");
  const { outcome, busy, run } = useAction();
  const create = (event) => {
    event.preventDefault();
    const count = Number(partitions);
    const base = `/admin/v2/persistent/${enc(tenant)}/${enc(namespace)}/${enc(name.trim())}`;
    run(() => (count > 0 ? api("PUT", `${base}/partitions`, { body: count }) : api("PUT", base)),
        `Topic ${name} created`, onCreated);
  };
  return html`<form class="inline" onSubmit=${create} aria-label="Create a topic">
    <${Field} label="New topic" value=${name} onValue=${setName} required />
    <${Field} label="Partitions (0: not partitioned)" type="number" min="0" max="1024" value=${partitions}
      onValue=${setPartitions} />
    <button type="submit" disabled=${busy}>Create topic</button>
    <${Outcome} outcome=${outcome} />
  </form>`;
}

export function NamespacePage({ tenant, namespace, tab }) {
  const tabs = [{ id: "topics", label: "Topics" }, { id: "policies", label: "Policies" },
                { id: "permissions", label: "Permissions" }];
  const select = (id) => { window.location.hash = link("namespace", tenant, namespace, id); };
  const base = `/admin/v2/namespaces/${enc(tenant)}/${enc(namespace)}`;
  return html`<section>
    <h1 tabindex="-1">Namespace ${tenant}/${namespace}</h1>
    <${Tabs} label="Namespace" tabs=${tabs} selected=${tab} onSelect=${select} />
    <${TabPanel} id=${tab}>
      ${tab === "topics" && html`<${TopicList} tenant=${tenant} namespace=${namespace} />`}
      ${tab === "policies" && html`<${PoliciesEditor} base=${base} level="namespace" />`}
      ${tab === "permissions" && html`<${PermissionsEditor} base=${base} />`}
    <//>
  </section>`;
}
