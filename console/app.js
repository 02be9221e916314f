// The console: sign-in, the hash router (tenants → namespaces → topics) and the page frame.
import { render } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { api, getToken, loadConfig, onUnauthenticated, setToken, tokenRole } from "./api.js";
import { ErrorNote, html } from "./ui.js";
import { HomePage, TenantPage } from "./views/tenants.js";
import { NamespacePage } from "./views/namespace.js";
import { TopicPage } from "./views/topic.js";

function parseRoute(hash) {
  const parts = hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  const [kind, ...rest] = parts;
  if (kind === "tenant" && rest.length >= 1) return { page: "tenant", tenant: rest[0] };
  if (kind === "namespace" && rest.length >= 2) {
    return { page: "namespace", tenant: rest[0], namespace: rest[1], tab: rest[2] || "topics" };
  }
  if (kind === "topic" && rest.length >= 4) {
    const [domain, tenant, namespace, name, tab, subscription] = rest;
    return { page: "topic", topic: { domain, tenant, namespace, name, full: `${domain}://${tenant}/${namespace}/${name}` },
             tab: tab || "overview", subscription };
  }
  return { page: "home" };
}

function useRoute() {
  const [route, setRoute] = useState(() => parseRoute(window.location.hash));
  useEffect(() => {
    const changed = () => setRoute(parseRoute(window.location.hash));
    window.addEventListener("hashchange", changed);
    return () => window.removeEventListener("hashchange", changed);
  }, []);
  return route;
}

function SignIn({ config, reason, onSignedIn }) {
  const [token, setTokenText] = useState("");
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const submit = async (event) => {
    event.preventDefault();
    setBusy(true);
    setToken(token.trim());
    try {
      await api("GET", "/admin/v2/clusters");  // any authenticated role may: checks the token
      onSignedIn();
    } catch (exc) {
      setToken("");
      setError(exc);
    } finally {
      setBusy(false);
    }
  };
  return html`<main id="main" class="signin">
    <h1 tabindex="-1">Sign in to Magnetar</h1>
    <p>The console acts with your own credentials: what you may see and change is what your role's grants allow.</p>
    ${reason && html`<p class="error" role="alert">${reason}</p>`}
    <form onSubmit=${submit}>
      <div class="field">
        <label for="token">Token</label>
        <textarea id="token" rows="4" required value=${token} onInput=${(e) => setTokenText(e.currentTarget.value)}
          aria-describedby="token-hint" autocomplete="off" spellcheck="false"></textarea>
        <small id="token-hint" class="muted">A Pulsar JWT (magnetar tokens create --subject ROLE); kept in this tab only.</small>
      </div>
      <button type="submit" class="primary" disabled=${busy}>Sign in</button>
    </form>
    <${ErrorNote} error=${error} />
    ${!config.authentication && html`<p><button onClick=${() => onSignedIn()}>Continue without a token</button></p>`}
  </main>`;
}

function Crumbs({ route }) {
  const items = [["Tenants", "#/"]];
  const tenant = route.tenant || route.topic?.tenant;
  const namespace = route.namespace || route.topic?.namespace;
  if (tenant) items.push([tenant, `#/tenant/${encodeURIComponent(tenant)}`]);
  if (namespace) items.push([namespace, `#/namespace/${encodeURIComponent(tenant)}/${encodeURIComponent(namespace)}`]);
  if (route.topic) items.push([route.topic.name, null]);
  return html`<nav aria-label="Breadcrumb" class="crumbs"><ol>
    ${items.map(([text, href], i) => html`<li>${href && i < items.length - 1
      ? html`<a href=${href}>${text}</a>` : html`<span aria-current="page">${text}</span>`}</li>`)}
  </ol></nav>`;
}

function Page({ route }) {
  const main = useRef(null);
  useEffect(() => {  // a new page: focus its heading, as a page load would
    main.current?.querySelector("h1")?.focus();
  }, [route.page, route.tenant, route.namespace, route.topic?.full]);
  let body;
  if (route.page === "tenant") body = html`<${TenantPage} tenant=${route.tenant} />`;
  else if (route.page === "namespace") body = html`<${NamespacePage} ...${route} />`;
  else if (route.page === "topic") body = html`<${TopicPage} topic=${route.topic} tab=${route.tab} subscription=${route.subscription} />`;
  else body = html`<${HomePage} />`;
  return html`<main id="main" ref=${main}><${Crumbs} route=${route} />${body}</main>`;
}

function App({ config }) {
  const route = useRoute();
  const [signedIn, setSignedIn] = useState(Boolean(getToken()) || !config.authentication);
  const [reason, setReason] = useState("");
  useEffect(() => onUnauthenticated((why) => {
    setToken("");
    setReason(`Signed out: ${why}`);
    setSignedIn(false);
  }), []);
  const token = getToken();
  const signOut = () => {
    setToken("");
    setReason("");
    setSignedIn(false);
  };
  return html`<div class="app">
    <a class="skip" href="#main" onClick=${(e) => { e.preventDefault(); document.getElementById("main")?.focus(); }}>Skip to content</a>
    <header class="top">
      <a class="brand" href="#/">Magnetar console</a>
      <span class="who">${token ? html`Signed in as <strong>${tokenRole(token) || "(token)"}</strong>` : signedIn ? "No authentication" : ""}</span>
      ${token && html`<button onClick=${signOut}>Sign out</button>`}
      ${!token && signedIn && html`<button onClick=${() => setSignedIn(false)}>Sign in with a token</button>`}
    </header>
    ${signedIn
      ? html`<${Page} route=${route} />`
      : html`<${SignIn} config=${config} reason=${reason} onSignedIn=${() => { setReason(""); setSignedIn(true); }} />`}
  </div>`;
}

loadConfig().then((config) => {
  const root = document.getElementById("root");
  root.textContent = "";  // the "Loading" placeholder
  render(html`<${App} config=${config} />`, root);
});
