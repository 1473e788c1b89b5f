// Pause (with a note), resume (with a misfire choice), trigger now, edit, delete — for one job.
// Used by the Jobs list and the job page; every action is one public API call.
import { useState } from "preact/hooks";
import { api, get, post } from "./api.js";
import { MISFIRE } from "./format.js";
import { Dialog, ErrorBox, html, link, parseJsonObject, useAction } from "./ui.js";

const RESUME_CHOICES = [
  ["", "The job's own policy"],
  ["run_once", "run_once"],
  ["run_all", "run_all"],
  ["skip", "skip"],
];

export function JobActions({ job, onChanged, compact }) {
  const [open, setOpen] = useState(null);
  const [note, setNote] = useState("");
  const [misfire, setMisfire] = useState("");
  const [edit, setEdit] = useState(null);
  const [triggered, setTriggered] = useState(null);
  const [preview, setPreview] = useState(null); // what a resume now would do, per policy (GET /jobs/{id}/history)
  const action = useAction();
  const close = () => { setOpen(null); action.setError(null); };
  const done = async (call) => {
    const result = await action.run(call);
    if (result !== undefined) { close(); onChanged?.(result); }
    return result;
  };
  const name = job.name;
  const openEdit = () => {
    setEdit({ schedule: job.schedule, timezone: job.timezone, description: job.description || "",
      priority: job.priority, payload: JSON.stringify(job.payload, null, 2) });
    setOpen("edit");
  };
  const saveEdit = (e) => {
    e.preventDefault();
    return done(() => {
      const payload = parseJsonObject(edit.payload);
      return api("PATCH", `/jobs/${encodeURIComponent(job.id)}`, {
        body: { schedule: edit.schedule, timezone: edit.timezone, description: edit.description, priority: edit.priority, payload },
        headers: { "If-Match": String(job.version) },
      });
    });
  };
  const trigger = async () => {
    const run = await action.run(() => post(`/jobs/${encodeURIComponent(job.id)}/trigger`, {}));
    if (run) { setTriggered(run); onChanged?.(run); }
  };
  const ownPolicy = MISFIRE[job.misfire_policy];
  const openResume = () => {
    setMisfire(""); setPreview(null); setOpen("resume");
    get(`/jobs/${encodeURIComponent(job.id)}/history?limit=1&upcoming=0`)
      .then((h) => setPreview(Object.fromEntries((h.resume_preview || []).map((p) => [p.policy, p]))))
      .catch(() => setPreview({}));
  };
  const ifNow = (value) => {
    const p = preview?.[value || job.misfire_policy];
    if (!p) return null;
    return html`<br /><span class="muted">If resumed now: ${p.runs_count} run${p.runs_count === 1 ? "" : "s"} queued, ${p.skipped_count} recorded skipped${p.complete ? "" : " (of the first missed occurrences; the later ones alike)"}.</span>`;
  };
  return html`<div class="actions">
    ${job.state === "active" && html`<button type="button" onClick=${() => { setNote(""); setOpen("pause"); }} aria-label=${"Pause " + name}>Pause</button>`}
    ${job.state === "paused" && html`<button type="button" onClick=${openResume} aria-label=${"Resume " + name}>Resume</button>`}
    <button type="button" onClick=${trigger} disabled=${action.busy} aria-label=${"Trigger " + name + " now"}>Trigger now</button>
    <button type="button" onClick=${openEdit} aria-label=${"Edit " + name}>Edit</button>
    <button type="button" class="danger" onClick=${() => setOpen("delete")} aria-label=${"Delete " + name}>Delete</button>
    ${triggered && html`<span role="status">Run <a href=${link("runs", triggered.id)}>${compact ? "started" : triggered.id}</a></span>`}
    ${!open && html`<${ErrorBox} error=${action.error} />`}

    <${Dialog} open=${open === "pause"} title=${"Pause " + name} onClose=${close}>
      <form class="form" onSubmit=${(e) => { e.preventDefault(); done(() => post(`/jobs/${encodeURIComponent(job.id)}/pause`, note ? { note } : {})); }}>
        <p>No new runs start while the job is paused; runs queued ahead of their due time are withdrawn (recorded skipped, reason <code>paused</code>) until you resume.</p>
        <label>Note (shown beside the job)<input value=${note} maxlength="1000" onInput=${(e) => setNote(e.target.value)} /></label>
        <${ErrorBox} error=${action.error} />
        <div class="actions"><button class="primary" disabled=${action.busy}>Pause</button><button type="button" onClick=${close}>Cancel</button></div>
      </form>
    <//>

    <${Dialog} open=${open === "resume"} title=${"Resume " + name} onClose=${close}>
      <form class="form" onSubmit=${(e) => { e.preventDefault(); done(() => post(`/jobs/${encodeURIComponent(job.id)}/resume`, misfire ? { misfire_policy: misfire } : {})); }}>
        <fieldset><legend>Occurrences missed while paused</legend>
          ${RESUME_CHOICES.map(([value, label]) => html`<label class="choice">
            <input type="radio" name="misfire" value=${value} checked=${misfire === value} onChange=${() => setMisfire(value)} />
            <span><strong>${label}</strong>: ${value ? MISFIRE[value] : `${job.misfire_policy} — ${ownPolicy}`}${ifNow(value)}</span>
          </label>`)}
        </fieldset>
        <p class="muted">Runs the pause withdrew that are still ahead of their due time are queued again either way.</p>
        <${ErrorBox} error=${action.error} />
        <div class="actions"><button class="primary" disabled=${action.busy}>Resume</button><button type="button" onClick=${close}>Cancel</button></div>
      </form>
    <//>

    <${Dialog} open=${open === "edit"} title=${"Edit " + name} onClose=${close}>
      ${edit && html`<form class="form" onSubmit=${saveEdit}>
        <div class="row">
          <label>Schedule<input value=${edit.schedule} required onInput=${(e) => setEdit({ ...edit, schedule: e.target.value })} /></label>
          <label>Time zone<input value=${edit.timezone} required onInput=${(e) => setEdit({ ...edit, timezone: e.target.value })} /></label>
          <label>Priority<select value=${edit.priority} onChange=${(e) => setEdit({ ...edit, priority: e.target.value })}>
            ${["high", "default", "low"].map((p) => html`<option value=${p}>${p}</option>`)}</select></label>
        </div>
        <label>Description<input value=${edit.description} onInput=${(e) => setEdit({ ...edit, description: e.target.value })} /></label>
        <label>Payload (JSON object)<textarea value=${edit.payload} onInput=${(e) => setEdit({ ...edit, payload: e.target.value })}></textarea></label>
        <p class="muted">Saved with <code>If-Match: ${job.version}</code>: if someone changed the job meanwhile, the API refuses (412) and nothing changes.</p>
        <${ErrorBox} error=${action.error} />
        <div class="actions"><button class="primary" disabled=${action.busy}>Save</button><button type="button" onClick=${close}>Cancel</button></div>
      </form>`}
    <//>

    <${Dialog} open=${open === "delete"} title=${"Delete " + name} onClose=${close}>
      <p>The job is deleted; runs queued ahead are recorded skipped (reason <code>deleted</code>); its run history stays.</p>
      <${ErrorBox} error=${action.error} />
      <div class="actions">
        <button class="danger primary" disabled=${action.busy} onClick=${() => done(() => api("DELETE", `/jobs/${encodeURIComponent(job.id)}`, { headers: { "If-Match": String(job.version) } }))}>Delete</button>
        <button type="button" onClick=${close}>Cancel</button>
      </div>
    <//>
  </div>`;
}
