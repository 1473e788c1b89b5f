// One job: its history as a grid (history-grid.js), its definition and policies in words, fire times
// around the next DST change (from the schedule preview), and a timeline of its runs, skipped
// occurrences and their reasons included.
import { get, query } from "./api.js";
import { handlerOf, NOTES, nextOffsetChange, offsetText, policiesInWords, scheduleInWords } from "./format.js";
import { HistoryGrid } from "./history-grid.js";
import { JobActions } from "./job-actions.js";
import { Badge, ErrorBox, html, Json, link, usePoll, When } from "./ui.js";

async function aroundDst(job) {
  if (job.state !== "active" || !job.next_fire_times.length) return null;
  const change = nextOffsetChange(job.timezone, Date.now());
  if (!change) return { change: null };
  const times = job.next_fire_times.map((t) => new Date(t).getTime());
  const spacing = times.length > 1 ? times[1] - times[0] : 24 * 3600 * 1000;
  const window = Math.min(3 * 24 * 3600 * 1000, Math.max(2000, 3 * spacing));
  const after = new Date(new Date(change.at).getTime() - window).toISOString();
  const preview = await get("/schedules/preview" + query({ schedule: job.schedule, timezone: job.timezone, count: 8,
    dst_gap: job.dst_gap, dst_overlap: job.dst_overlap, after }));
  return { change, preview };
}

function DstSection({ dst, job }) {
  if (!dst) return null;
  if (!dst.change) return html`<p>${job.timezone} has no offset change in the next 400 days.</p>`;
  const { change, preview } = dst;
  const offsets = `the offset goes from ${offsetText(change.before)} to ${offsetText(change.after)}`;
  return html`<p>Next change in ${job.timezone}: <code>${change.at}</code>, ${offsets}.
      The schedule preview (<code>GET /schedules/preview</code>) around it:</p>
    <table><caption class="sr-only">Fire times around the next DST change</caption>
      <thead><tr><th scope="col">Fires at (UTC)</th><th scope="col">Local wall clock</th><th scope="col">Note</th></tr></thead>
      <tbody>${preview.fire_times.map((f) => html`<tr>
        <td><code>${f.at}</code></td><td><code>${f.local}</code></td>
        <td>${f.note ? html`<strong>${f.note}</strong>: ${NOTES[f.note] || ""}` : html`<span class="muted">—</span>`}</td>
      </tr>`)}</tbody>
    </table>`;
}

function Timeline({ runs, timezone }) {
  if (!runs.length) return html`<p class="muted">No runs yet.</p>`;
  return html`<ol class="timeline" aria-label="Runs, newest scheduled first">
    ${runs.map((run) => html`<li key=${run.id} class=${"state-" + run.state}>
      <span class="fg"><${When} iso=${run.scheduled_at} timezone=${timezone} /> · <a href=${link("runs", run.id)}><${Badge} state=${run.state} /></a>
      <span class="muted"> ${run.trigger}${run.attempt > 1 ? `, attempt ${run.attempt}` : ""}</span>
      ${run.state === "skipped" && html` — skipped: <strong>${run.skip_reason || "no reason recorded"}</strong>${run.skipped_count > 1 ? ` (${run.skipped_count} occurrences)` : ""}`}
      ${run.error && html` — <span>${run.error}</span>`}</span>
    </li>`)}
  </ol>`;
}

export function JobDetail({ id }) {
  const { data, error, reload } = usePoll(async () => {
    const job = await get(`/jobs/${encodeURIComponent(id)}`);
    const [runs, dst] = await Promise.all([
      get(`/jobs/${encodeURIComponent(id)}/runs${query({ limit: 100 })}`),
      aroundDst(job).catch((e) => ({ error: e })),
    ]);
    return { job, runs: runs.items, dst };
  }, [id]);
  if (error?.status === 404) return html`<h1>Job not found</h1><p>No job <code>${id}</code> for your tenant.</p><p><a href="#/jobs">All jobs</a></p>`;
  if (!data) return html`<h1>Job</h1><${ErrorBox} error=${error} />${!error && html`<p>Loading…</p>`}`;
  const { job, runs, dst } = data;
  return html`<h1>${job.name} <${Badge} state=${job.state} /></h1>
    <${ErrorBox} error=${error} />
    ${job.paused_note && html`<p class="notice">Paused: ${job.paused_note}</p>`}
    <${JobActions} job=${job} onChanged=${reload} />
    <${HistoryGrid} job=${job} />
    <h2>Definition</h2>
    <dl class="props">
      <dt>Id</dt><dd><code>${job.id}</code> (version ${job.version})</dd>
      <dt>Schedule</dt><dd>${scheduleInWords(job.schedule, job.timezone)} — <code>${job.schedule}</code></dd>
      <dt>Time zone</dt><dd>${job.timezone}</dd>
      <dt>Target</dt><dd><code>${handlerOf(job)}</code></dd>
      <dt>Priority</dt><dd>${job.priority}</dd>
      <dt>Pool</dt><dd>${job.pool}</dd>
      ${job.description && html`<dt>Description</dt><dd>${job.description}</dd>`}
      <dt>Next runs</dt><dd>${job.next_fire_times.length ? job.next_fire_times.map((t) => html`<div><${When} iso=${t} timezone=${job.timezone} /></div>`) : "none"}</dd>
    </dl>
    <h2>Policies</h2>
    <dl class="props">${policiesInWords(job).map(([k, v]) => html`<dt>${k}</dt><dd>${v}</dd>`)}</dl>
    <h2>Around the next DST change</h2>
    ${dst?.error ? html`<${ErrorBox} error=${dst.error} />` : dst ? html`<${DstSection} dst=${dst} job=${job} />` : html`<p class="muted">No fire times (the job is ${job.state}).</p>`}
    <h2>Payload</h2>
    <${Json} value=${job.payload} label="Payload" />
    <h2>Runs</h2>
    <p><a href=${"#/runs?job_id=" + encodeURIComponent(job.id)}>Filter the runs list by this job</a></p>
    <${Timeline} runs=${runs} timezone=${job.timezone} />`;
}
