// Handlers: each registered handler version, its status and what refers to it (GET /handlers);
// administrators see every tenant (scope=all) and may mark a version draining or un-mark it.
import { useState } from "preact/hooks";
import { ApiError, api, get } from "./api.js";
import { Badge, ErrorBox, html, useAction, usePoll } from "./ui.js";

const COUNTS = [["jobs", "Jobs"], ["queued", "Queued"], ["running", "Running"], ["retrying", "Retrying"], ["dead_lettered", "Dead letters"]];

// The handlers as an administrator sees them (every tenant), else as the tenant does.
async function loadHandlers() {
  try {
    return { ...(await get("/handlers?scope=all")), admin: true };
  } catch (e) {
    if (!(e instanceof ApiError) || e.status !== 403) throw e;
    return { ...(await get("/handlers")), admin: false };
  }
}

function Examples({ examples }) {
  const ids = [...(examples?.jobs || []).map((id) => ["jobs", id]), ...(examples?.runs || []).map((id) => ["runs", id])];
  if (!ids.length) return html`<span class="muted">—</span>`;
  return html`<ul class="plain">${ids.map(([kind, id]) => html`<li><a class="code" href=${"#/" + kind + "/" + encodeURIComponent(id)}>${id}</a></li>`)}</ul>`;
}

function DrainButton({ version, onChanged }) {
  const action = useAction();
  const label = `${version.status === "active" ? "Drain" : "Undrain"} ${version.name} v${version.version}`;
  const path = `/handlers/${encodeURIComponent(version.name)}/versions/${version.version}/drain`;
  const click = async () => {
    const done = await action.run(() => api(version.status === "active" ? "POST" : "DELETE", path));
    if (done) onChanged();
  };
  if (version.status === "active" && version.newest) return html`<span class="muted">newest</span>`;
  return html`<button type="button" aria-label=${label} disabled=${action.busy} onClick=${click}>
    ${version.status === "active" ? "Drain" : "Undrain"}</button><${ErrorBox} error=${action.error} />`;
}

function Row({ version, admin, onChanged, missing }) {
  return html`<tr key=${version.name + "@" + version.version}>
    <th scope="row"><span class="code">${version.name}</span>${version.description && html`<div class="muted">${version.description}</div>`}</th>
    <td>${version.version ?? html`<span class="muted">unbound</span>`}${version.newest ? html` <span class="muted">(newest)</span>` : ""}</td>
    <td>${missing ? html`<${Badge} state="missing" />` : html`<${Badge} state=${version.status} />`}</td>
    ${COUNTS.map(([key]) => html`<td class="num">${version[key]}</td>`)}
    <td><${Examples} examples=${version.examples} /></td>
    ${admin && html`<td>${missing ? "" : html`<${DrainButton} version=${version} onChanged=${onChanged} />`}</td>`}
  </tr>`;
}

export function Handlers() {
  const { data, error, reload } = usePoll(loadHandlers, []);
  return html`<h1>Handlers</h1>
    <p class="muted">Each registered handler version, and the jobs and runs that will run it: jobs pinned to it (or
      unpinned, for the newest version), runs bound to it (or unbound, for the newest) queued, running, retrying and
      dead-lettered. A version marked <em>draining</em> takes no new pins and shows <em>drained</em> once nothing refers to it.</p>
    <${ErrorBox} error=${error} />
    ${!data ? !error && html`<p>Loading…</p>` : html`
      <p class="muted">Code version <code>${data.code_version || "—"}</code>; ${data.scope === "all" ? "every tenant" : "this tenant"}.</p>
      <table>
        <caption class="sr-only">Handler versions</caption>
        <thead><tr><th scope="col">Handler</th><th scope="col">Version</th><th scope="col">Status</th>
          ${COUNTS.map(([, label]) => html`<th scope="col" class="num">${label}</th>`)}
          <th scope="col">Examples</th>${data.admin && html`<th scope="col">Actions</th>`}</tr></thead>
        <tbody>
          ${data.handlers.map((v) => html`<${Row} version=${v} admin=${data.admin} onChanged=${reload} />`)}
          ${data.missing.map((v) => html`<${Row} version=${v} admin=${data.admin} onChanged=${reload} missing=${true} />`)}
        </tbody>
      </table>
      ${data.missing.length > 0 && html`<p role="note">Rows marked <em>missing</em> name a handler or version this code does not register: deploying without it strands them.</p>`}`}`;
}

// The versions of each handler, for the New job form: {name: [{version, newest, status, payload_schema}]}.
export function useHandlerVersions() {
  const [versions, setVersions] = useState(null);
  const load = () => {
    if (versions) return;
    get("/handlers").then((body) => {
      const byName = {};
      for (const v of body.handlers) (byName[v.name] ||= []).push(v);
      setVersions(byName);
    }).catch(() => setVersions({}));
  };
  return [versions, load];
}

// The fields a payload schema lists: name, type, required, description.
export function PayloadFields({ schema }) {
  if (!schema) return html`<p class="muted">This version declares no payload schema: any JSON object.</p>`;
  const required = new Set(schema.required || []);
  const fields = Object.entries(schema.properties || {});
  if (!fields.length) return html`<p class="muted">Payload schema: <code>${JSON.stringify(schema)}</code></p>`;
  return html`<table aria-label="Payload fields">
    <thead><tr><th scope="col">Field</th><th scope="col">Type</th><th scope="col">Required</th></tr></thead>
    <tbody>${fields.map(([name, field]) => html`<tr><td class="code">${name}</td>
      <td>${field.type || (field.anyOf || []).map((t) => t.type).filter(Boolean).join(" | ") || "any"}${"default" in field ? html` <span class="muted">(default ${JSON.stringify(field.default)})</span>` : ""}</td>
      <td>${required.has(name) ? "yes" : "no"}</td></tr>`)}</tbody>
  </table>`;
}
