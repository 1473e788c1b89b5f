// Jobs: search and filters, schedule in words and as written, next runs, last run, actions.
import { useState } from "preact/hooks";
import { get, listAll, post, query } from "./api.js";
import { handlerOf, scheduleInWords } from "./format.js";
import { JobActions } from "./job-actions.js";
import { PayloadFields, useHandlerVersions } from "./page-handlers.js";
import { Badge, Dialog, ErrorBox, html, link, parseJsonObject, setParams, useAction, usePoll, When } from "./ui.js";

// The last run of each job: its newest run scheduled at or before now (runs queued ahead of their
// due time come first in the list, newest scheduled first; they are not "last" yet).
async function lastRuns(jobs) {
  const now = Date.now();
  const pairs = await Promise.all(jobs.map(async (job) => {
    const page = await get(`/jobs/${encodeURIComponent(job.id)}/runs${query({ limit: 25 })}`).catch(() => ({ items: [] }));
    return [job.id, page.items.find((run) => new Date(run.scheduled_at).getTime() <= now) || null];
  }));
  return Object.fromEntries(pairs);
}

function CreateJob({ onCreated }) {
  const blank = { name: "", handler: "demo.echo", version: "", schedule: "rate(1 minute)", timezone: "UTC", payload: "{}", max_attempts: "3", pool: "", timeout_seconds: "300" };
  const [open, setOpen] = useState(false);
  const [form, setForm] = useState(blank);
  const [versions, loadVersions] = useHandlerVersions();
  const action = useAction();
  const field = (key) => ({ value: form[key], onInput: (e) => setForm({ ...form, [key]: e.target.value }) });
  const known = versions?.[form.handler] || [];
  const newest = known.find((v) => v.newest);
  const chosen = form.version ? known.find((v) => String(v.version) === form.version) : newest;
  const submit = async (e) => {
    e.preventDefault();
    const target = form.version ? { handler: form.handler, version: Number(form.version) } : { handler: form.handler };
    const pool = form.pool ? { pool: form.pool } : {}; // none: the API chooses from the timeout (docs/pools.md)
    const job = await action.run(() => post("/jobs", {
      name: form.name, schedule: form.schedule, timezone: form.timezone,
      target, payload: parseJsonObject(form.payload),
      retry: { max_attempts: Number(form.max_attempts) },
      timeout_seconds: Number(form.timeout_seconds), ...pool,
    }));
    if (job) { setOpen(false); setForm(blank); onCreated(job); }
  };
  return html`<button type="button" class="primary" onClick=${() => { loadVersions(); setOpen(true); }}>New job</button>
    <${Dialog} open=${open} title="New job" onClose=${() => setOpen(false)}>
      <form class="form" onSubmit=${submit}>
        <div class="row">
          <label>Name<input required maxlength="200" ...${field("name")} /></label>
          <label>Handler<input required list="handler-names" value=${form.handler}
            onInput=${(e) => setForm({ ...form, handler: e.target.value, version: "" })} /></label>
          <datalist id="handler-names">${Object.keys(versions || {}).sort().map((name) => html`<option value=${name} />`)}</datalist>
          <label>Version<select value=${form.version} onChange=${(e) => setForm({ ...form, version: e.target.value })}
              aria-describedby="version-help">
            <option value="">${newest ? `newest (v${newest.version})` : "newest"}</option>
            ${known.map((v) => html`<option value=${String(v.version)} disabled=${v.status !== "active"}>
              pin v${v.version}${v.status !== "active" ? ` (${v.status})` : ""}</option>`)}
          </select></label>
        </div>
        <p id="version-help" class="muted">Unpinned, each run binds to the newest version when its first attempt starts; a pinned job always runs its version.</p>
        <div class="row">
          <label>Schedule<input required aria-describedby="schedule-help" ...${field("schedule")} /></label>
          <label>Time zone<input required ...${field("timezone")} /></label>
          <label>Max attempts<input type="number" min="1" max="100" required ...${field("max_attempts")} /></label>
        </div>
        <div class="row">
          <label>Timeout (seconds)<input type="number" min="1" max="43200" required aria-describedby="pool-help" ...${field("timeout_seconds")} /></label>
          <label>Pool<select value=${form.pool} aria-describedby="pool-help" onChange=${(e) => setForm({ ...form, pool: e.target.value })}>
            <option value="">automatic</option>
            <option value="lambda">lambda</option>
            <option value="long">long</option>
            <option value="container">container</option>
          </select></label>
        </div>
        <p id="pool-help" class="muted">Automatic: container when the timeout is over 900 s, long for a chunked job, else lambda. Up to 900 s on lambda and long, 43200 s (12 h) on container.</p>
        <p id="schedule-help" class="muted">${scheduleInWords(form.schedule, form.timezone)} — cron, @daily, cron(…), rate(5 minutes) or at(2026-12-01T09:00:00).</p>
        ${chosen && html`<section aria-label="Payload schema"><h3>Payload of ${chosen.name} v${chosen.version}</h3><${PayloadFields} schema=${chosen.payload_schema} /></section>`}
        <label>Payload (JSON object)<textarea ...${field("payload")}></textarea></label>
        <${ErrorBox} error=${action.error} />
        <div class="actions"><button class="primary" disabled=${action.busy}>Create</button>
          <button type="button" onClick=${() => setOpen(false)}>Cancel</button></div>
      </form>
    <//>`;
}

export function Jobs({ params }) {
  const filters = { q: params.get("q") || "", state: params.get("state") || "", priority: params.get("priority") || "",
    handler: params.get("handler") || "" };
  const [created, setCreated] = useState(null);
  const { data, error, reload } = usePoll(async () => {
    const jobs = await listAll("/jobs", {}, 1000);
    return { jobs, last: await lastRuns(jobs.items.slice(0, 100)) };
  }, []);
  const update = (key) => (e) => setParams("jobs", { ...filters, [key]: e.target.value });
  const all = data?.jobs.items || [];
  const handlers = [...new Set(all.map(handlerOf))].sort();
  const needle = filters.q.toLowerCase();
  const shown = all.filter((job) =>
    (!filters.state || job.state === filters.state) && (!filters.priority || job.priority === filters.priority)
    && (!filters.handler || handlerOf(job) === filters.handler)
    && (!needle || [job.name, job.id, job.description, job.schedule, handlerOf(job)].some((t) => (t || "").toLowerCase().includes(needle))));
  const select = (key, label, options) => html`<label>${label}<select value=${filters[key]} onChange=${update(key)}>
    <option value="">any</option>${options.map((o) => html`<option value=${o}>${o}</option>`)}</select></label>`;
  return html`<h1>Jobs</h1>
    <div class="filters" role="search">
      <label>Search<input type="search" value=${filters.q} onInput=${update("q")} placeholder="name, id, schedule, handler" /></label>
      ${select("state", "State", ["active", "paused", "completed"])}
      ${select("priority", "Priority", ["high", "default", "low"])}
      ${select("handler", "Handler", handlers)}
      <${CreateJob} onCreated=${(job) => { setCreated(job); reload(); }} />
    </div>
    ${created && html`<p role="status">Created <a href=${link("jobs", created.id)}>${created.name}</a>.</p>`}
    <${ErrorBox} error=${error} />
    ${!data ? !error && html`<p>Loading…</p>` : html`<p class="muted">${shown.length} of ${all.length} jobs${data.jobs.more ? " (the newest 1000)" : ""}.</p>
    <table>
      <caption class="sr-only">Jobs</caption>
      <thead><tr><th scope="col">Job</th><th scope="col">Schedule</th><th scope="col">Time zone</th><th scope="col">Next runs</th>
        <th scope="col">Last run</th><th scope="col">State</th><th scope="col">Actions</th></tr></thead>
      <tbody>${shown.map((job) => {
        const last = data.last[job.id];
        return html`<tr key=${job.id}>
          <td><a href=${job.target?.workflow ? link("workflows", job.id) : link("jobs", job.id)}>${job.name}</a><div class="muted code">${handlerOf(job)}</div></td>
          <td>${scheduleInWords(job.schedule, job.timezone)}<div><code>${job.schedule}</code></div></td>
          <td>${job.timezone}</td>
          <td>${job.next_fire_times.length ? html`<ul class="plain">${job.next_fire_times.slice(0, 3).map((t) => html`<li><${When} iso=${t} timezone=${job.timezone} /></li>`)}</ul>`
            : html`<span class="muted">${job.state === "paused" ? "none while paused" : "none"}</span>`}</td>
          <td>${last ? html`<a href=${link("runs", last.id)}><${Badge} state=${last.state} /></a> <${When} iso=${last.scheduled_at} timezone=${job.timezone} />`
            : html`<span class="muted">no runs</span>`}</td>
          <td><${Badge} state=${job.state} />${job.paused_note && html`<div class="note">Paused: ${job.paused_note}</div>`}</td>
          <td><${JobActions} job=${job} onChanged=${reload} compact=${true} /></td>
        </tr>`;
      })}</tbody>
    </table>`}`;
}
