// One run: attempts, errors, output, logs, chunk progress, replays; cancel and retry.
import { useState } from "preact/hooks";
import { get, post } from "./api.js";
import { Badge, ErrorBox, html, Json, link, useAction, usePoll, When } from "./ui.js";

function Logs({ run }) {
  const [lines, setLines] = useState(null);
  const action = useAction();
  const logs = run.logs || {};
  if (!logs.lines) {
    return html`<p>Log group <code>${logs.log_group || "—"}</code>; CloudWatch Logs Insights query:</p>
      <pre tabindex="0" aria-label="Logs Insights query">${logs.insights_query || "—"}</pre>`;
  }
  const load = () => action.run(async () => setLines(await get(logs.lines)));
  return html`<button type="button" onClick=${load} disabled=${action.busy}>${lines ? "Reload logs" : "Show logs"}</button>
    <${ErrorBox} error=${action.error} />
    ${lines && html`<pre tabindex="0" aria-label="Log lines">${lines.items.map((l) => `${l.timestamp || ""} ${l.level || ""} ${l.message || JSON.stringify(l)}`).join("\n") || "(no lines)"}</pre>
      ${lines.truncated && html`<p class="muted">Truncated: the first 5000 lines.</p>`}`}`;
}

export function RunDetail({ id }) {
  const { data: run, error, reload } = usePoll(() => get(`/runs/${encodeURIComponent(id)}`), [id]);
  const action = useAction();
  if (error?.status === 404) {
    return html`<h1>Run not found</h1><p>No run <code>${id}</code> for your tenant.</p><p><a href="#/runs">All runs</a></p>`;
  }
  if (!run) return html`<h1>Run</h1><${ErrorBox} error=${error} />${!error && html`<p>Loading…</p>`}`;
  const act = (verb) => action.run(async () => { await post(`/runs/${encodeURIComponent(run.id)}/${verb}`, {}); await reload(); });
  const cancellable = ["queued", "running", "retrying"].includes(run.state) && !run.cancel_requested;
  const output = run.output && typeof run.output === "object" && "ref" in run.output && Object.keys(run.output).length === 1;
  return html`<h1>Run <code>${run.id}</code> <${Badge} state=${run.state} /></h1>
    <${ErrorBox} error=${error} />
    <div class="actions">
      ${cancellable && html`<button type="button" class="danger" onClick=${() => act("cancel")} disabled=${action.busy}>Cancel run</button>`}
      ${run.state === "failed" && html`<button type="button" onClick=${() => act("retry")} disabled=${action.busy}>Retry run</button>
        <a class="button" href=${"#/dead-letters?job_id=" + encodeURIComponent(run.job_id)}>Replay with another payload…</a>`}
      ${run.cancel_requested && run.state === "running" && html`<span role="status">Cancel requested: the worker stops at its next heartbeat.</span>`}
    </div>
    <${ErrorBox} error=${action.error} />
    <dl class="props">
      <dt>Job</dt><dd><a href=${link("jobs", run.job_id)}><code>${run.job_id}</code></a></dd>
      <dt>Trigger</dt><dd>${run.trigger}</dd>
      <dt>Pool</dt><dd id="pool">${run.pool}</dd>
      ${run.handler && html`<dt>Handler</dt><dd id="handler"><code>${ranBy(run)}</code>${run.handler_version == null ? html` <span class="muted">(binds to the newest version when its first attempt starts)</span>` : ""}</dd>`}
      <dt>Scheduled</dt><dd><${When} iso=${run.scheduled_at} /></dd>
      <dt>Started</dt><dd><${When} iso=${run.started_at} /></dd>
      <dt>Finished</dt><dd><${When} iso=${run.finished_at} /></dd>
      <dt>Attempt</dt><dd>${run.attempt}</dd>
      ${run.waiting_for && html`<dt>Waiting for</dt><dd id="waiting">${waitingInWords(run.waiting_for)}
        ${run.waiting_until && html` — its delivery looks again by <${When} iso=${run.waiting_until} />`}
        ${run.waits ? ` (waited ${run.waits} time${run.waits === 1 ? "" : "s"})` : ""}</dd>`}
      ${run.deadline_at && html`<dt>Deadline</dt><dd id="deadline"><${When} iso=${run.deadline_at} />
        ${run.deadline_missed_at && html` <strong class="deadline-missed">missed</strong> (found <${When} iso=${run.deadline_missed_at} />; the owners were told)`}</dd>`}
      ${run.skip_reason && html`<dt>Skipped</dt><dd>${run.skip_reason}${run.skipped_count > 1 ? ` (${run.skipped_count} occurrences)` : ""}</dd>`}
      ${run.error && html`<dt>Error</dt><dd class="error-text">${run.error}</dd>`}
      ${run.progress && html`<dt>Progress</dt><dd>
        <progress id="progress" max=${run.progress.total || 1} value=${run.progress.done} aria-label=${`${run.progress.unit} done`}></progress>
        ${" "}${run.progress.done} of ${run.progress.total ?? "?"} ${run.progress.unit} done</dd>`}
      <dt>Record expires</dt><dd><${When} iso=${run.expires_at} /></dd>
    </dl>
    <h2>Attempts</h2>
    ${run.attempts.length ? html`<table><caption class="sr-only">Attempts</caption>
      <thead><tr><th scope="col">#</th><th scope="col">Started</th><th scope="col">Finished</th><th scope="col">Ran</th><th scope="col">Code version</th><th scope="col">Outcome</th><th scope="col">Error</th></tr></thead>
      <tbody>${run.attempts.map((a) => html`<tr><td>${a.attempt}</td><td><${When} iso=${a.started_at} /></td>
        <td><${When} iso=${a.finished_at} /></td><td>${a.handler ? html`<code>${ranBy(a)}</code>` : "—"}</td>
        <td>${a.code_version ? html`<code>${a.code_version}</code>` : "—"}</td><td>${a.outcome || "—"}</td><td>${a.error || ""}</td></tr>`)}</tbody></table>`
      : html`<p class="muted">No attempt yet.</p>`}
    <h2>Output</h2>
    ${run.output_expired ? html`<p>The output has expired (the bucket's retention removed it).</p>`
      : output ? html`<p>Kept in S3 as <code>${run.output.ref}</code>.</p>`
      : run.output === null ? html`<p class="muted">No output.</p>` : html`<${Json} value=${run.output} label="Output" />`}
    <h2>Logs</h2>
    <${Logs} run=${run} />
    ${run.replays.length > 0 && html`<h2>Replays</h2>
      <table><caption class="sr-only">Replays, retries and discards</caption>
        <thead><tr><th scope="col">Action</th><th scope="col">At</th><th scope="col">From attempt</th><th scope="col">Payload changed</th></tr></thead>
        <tbody>${run.replays.map((r) => html`<tr><td>${r.action}</td><td><${When} iso=${r.at} /></td><td>${r.from_attempt}</td><td>${r.payload_changed ? "yes" : "no"}</td></tr>`)}</tbody></table>`}`;
}

/** `concurrency:<key>`, `rate:<key>`, `…:@tenant` (docs/semantics/limits.md) in words. */
export function waitingInWords(waitingFor) {
  const [kind, key] = waitingFor.split(/:(.*)/s);
  const what = key === "@tenant" ? "the tenant's" : `key ${key}'s`;
  if (kind === "concurrency") return `a concurrency slot (${what} limit is reached)`;
  if (kind === "rate") return `its turn under ${what} rate limit`;
  return waitingFor;
}

// "name@version" of a run or an attempt (decision 0048); the name alone while a run is unbound.
function ranBy(item) {
  return item.handler_version == null ? item.handler : `${item.handler}@${item.handler_version}`;
}
