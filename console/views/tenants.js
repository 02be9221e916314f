// Tenants and their namespaces; a role that may not list tenants opens one by name.
import { useState } from "preact/hooks";
import { api, enc } from "../api.js";
import { ErrorNote, Field, Loading, Outcome, html, link, useAction, useLoad } from "../ui.js";

function OpenByName() {
  const [name, setName] = useState("");
  const open = (event) => {
    event.preventDefault();
    const [tenant, namespace] = name.trim().split("/");
    if (!tenant) return;
    window.location.hash = namespace ? link("namespace", tenant, namespace) : link("tenant", tenant);
  };
  return html`<form class="inline" onSubmit=${open} aria-label="Open a tenant or namespace">
    <${Field} label="Tenant or tenant/namespace" value=${name} onValue=${setName} placeholder="public/default" />
    <button type="submit">Open</button>
  </form>`;
}

function CreateTenant({ onCreated }) {
  const [name, setName] = useState("");
  const [roles, setRoles] = useState("");
  const { outcome, busy, run } = useAction();
  const create = (event) => {
    event.preventDefault();
    const adminRoles = roles.split(",").map((r) => r.trim()).filter(Boolean);
    run(async () => {
      const clusters = await api("GET", "/admin/v2/clusters");
      await api("PUT", `/admin/v2/tenants/${enc(name.trim())}`, { body: { adminRoles, allowedClusters: clusters } });
    }, `Tenant ${name} created`, onCreated);
  };
  return html`<form class="inline" onSubmit=${create} aria-label="Create a tenant">
    <${Field} label="New tenant" value=${name} onValue=${setName} required />
    <${Field} label="Admin roles (comma-separated)" value=${roles} onValue=${setRoles} />
    <button type="submit" disabled=${busy}>Create tenant</button>
    <${Outcome} outcome=${outcome} />
  </form>`;
}

export function HomePage() {
  const tenants = useLoad(() => api("GET", "/admin/v2/tenants"), []);
  return html`<section>
    <h1 tabindex="-1">Tenants</h1>
    ${tenants.loading && html`<${Loading} what="tenants" />`}
    ${tenants.error && tenants.error.status === 403
      ? html`<p>Your role may not list every tenant (superusers only). Open the one you work in:</p>`
      : html`<${ErrorNote} error=${tenants.error} />`}
    ${tenants.data && html`<ul class="cards" aria-label="Tenants">
      ${tenants.data.map((t) => html`<li><a href=${link("tenant", t)}>${t}</a></li>`)}
    </ul>`}
    <${OpenByName} />
    ${tenants.data && html`<${CreateTenant} onCreated=${tenants.reload} />`}
  </section>`;
}

export function TenantPage({ tenant }) {
  const namespaces = useLoad(() => api("GET", `/admin/v2/namespaces/${enc(tenant)}`), [tenant]);
  const [name, setName] = useState("");
  const { outcome, busy, run } = useAction();
  const create = (event) => {
    event.preventDefault();
    run(() => api("PUT", `/admin/v2/namespaces/${enc(tenant)}/${enc(name.trim())}`),
        `Namespace ${tenant}/${name} created`, namespaces.reload);
  };
  return html`<section>
    <h1 tabindex="-1">Tenant ${tenant}</h1>
    ${namespaces.loading && html`<${Loading} what="namespaces" />`}
    <${ErrorNote} error=${namespaces.error} />
    ${namespaces.data && html`<ul class="cards" aria-label="Namespaces">
      ${namespaces.data.map((full) => {
        const ns = full.split("/").slice(1).join("/");
        return html`<li><a href=${link("namespace", tenant, ns)}>${full}</a></li>`;
      })}
    </ul>`}
    ${namespaces.error && html`<${OpenNamespace} tenant=${tenant} />`}
    ${namespaces.data && html`<form class="inline" onSubmit=${create} aria-label="Create a namespace">
      <${Field} label="New namespace" value=${name} onValue=${setName} required />
      <button type="submit" disabled=${busy}>Create namespace</button>
      <${Outcome} outcome=${outcome} />
    </form>`}
  </section>`;
}

function OpenNamespace({ tenant }) {
  const [name, setName] = useState("");
  const open = (event) => {
    event.preventDefault();
    if (name.trim()) window.location.hash = link("namespace", tenant, name.trim());
  };
  return html`<form class="inline" onSubmit=${open} aria-label="Open a namespace">
    <p>Listing namespaces is the tenant admins'. Open one your role has a grant in:</p>
    <${Field} label="Namespace" value=${name} onValue=${setName} placeholder="default" />
    <button type="submit">Open</button>
  </form>`;
}
