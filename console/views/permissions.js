// Grants of a namespace or a topic: which roles may produce, consume or run functions.
import { useState } from "preact/hooks";
import { api, enc } from "../api.js";
import { ConfirmButton, ErrorNote, Field, Loading, Outcome, html, useAction, useLoad } from "../ui.js";

const ACTIONS = ["produce", "consume", "functions"];

export function PermissionsEditor({ base }) {
  const grants = useLoad(() => api("GET", `${base}/permissions`), [base]);
  const [role, setRole] = useState("");
  const [actions, setActions] = useState(["consume"]);
  const { outcome, busy, run } = useAction();
  const toggle = (action) => setActions(actions.includes(action) ? actions.filter((a) => a !== action) : [...actions, action]);
  const grant = (event) => {
    event.preventDefault();
    run(() => api("POST", `${base}/permissions/${enc(role.trim())}`, { body: actions }),
        `Granted ${actions.join(", ")} to ${role}`, grants.reload);
  };
  const roles = Object.entries(grants.data || {});
  return html`<section aria-labelledby="grants-heading">
    <h2 id="grants-heading">Permissions</h2>
    ${grants.loading && html`<${Loading} what="grants" />`}
    <${ErrorNote} error=${grants.error} />
    ${grants.data && (roles.length ? html`<table>
      <caption class="sr-only">Roles and the actions granted to them</caption>
      <thead><tr><th scope="col">Role</th><th scope="col">Actions</th><th scope="col"><span class="sr-only">Revoke</span></th></tr></thead>
      <tbody>${roles.map(([name, granted]) => html`<tr>
        <th scope="row">${name}</th><td>${granted.join(", ")}</td>
        <td><${ConfirmButton} label="Revoke" onConfirm=${() => run(() => api("DELETE", `${base}/permissions/${enc(name)}`),
          `Revoked ${name}'s grant`, grants.reload)} /></td></tr>`)}</tbody>
    </table>` : html`<p class="muted">No grants.</p>`)}
    <form class="inline" onSubmit=${grant} aria-label="Grant actions to a role">
      <${Field} label="Role" value=${role} onValue=${setRole} required />
      <fieldset><legend>Actions</legend>
        ${ACTIONS.map((action) => html`<label class="check"><input type="checkbox" checked=${actions.includes(action)}
          onChange=${() => toggle(action)} /> ${action}</label>`)}
      </fieldset>
      <button type="submit" disabled=${busy || !actions.length}>Grant</button>
    </form>
    <${Outcome} outcome=${outcome} />
  </section>`;
}
