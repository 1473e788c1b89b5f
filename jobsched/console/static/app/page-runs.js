// Runs: filter by state, job and time (GET /runs); newest scheduled first.
import { get, query } from "./api.js";
import { Badge, ErrorBox, html, link, setParams, ShortId, usePoll, When } from "./ui.js";
import { STATES } from "./page-overview.js";

export function Runs({ params }) {
  const filters = { state: params.get("state") || "", job_id: params.get("job_id") || "", since: params.get("since") || "" };
  const { data, error } = usePoll(async () => {
    const since = filters.since ? new Date(filters.since + "Z").toISOString() : "";
    return get("/runs" + query({ state: filters.state, job_id: filters.job_id, since, limit: 100 }));
  }, [filters.state, filters.job_id, filters.since]);
  const update = (key) => (e) => setParams("runs", { ...filters, [key]: e.target.value });
  return html`<h1>Runs</h1>
    <form class="filters" role="search" onSubmit=${(e) => e.preventDefault()}>
      <label>State<select value=${filters.state} onChange=${update("state")}><option value="">any</option>
        ${STATES.map((s) => html`<option value=${s}>${s}</option>`)}</select></label>
      <label>Job id<input value=${filters.job_id} onChange=${update("job_id")} /></label>
      <label>Scheduled since (UTC)<input type="datetime-local" step="1" value=${filters.since} onChange=${update("since")} /></label>
    </form>
    <${ErrorBox} error=${error} />
    ${!data ? !error && html`<p>Loading…</p>` : html`
    <table><caption class="sr-only">Runs</caption>
      <thead><tr><th scope="col">Run</th><th scope="col">State</th><th scope="col">Job</th><th scope="col">Scheduled</th>
        <th scope="col">Started</th><th scope="col">Finished</th><th scope="col">Trigger</th><th scope="col">Detail</th></tr></thead>
      <tbody>${data.items.map((run) => html`<tr key=${run.id}>
        <td><${ShortId} id=${run.id} href=${link("runs", run.id)} /></td>
        <td><${Badge} state=${run.state} /></td>
        <td><a href=${link("jobs", run.job_id)}><code>${run.job_id}</code></a></td>
        <td><${When} iso=${run.scheduled_at} /></td><td><${When} iso=${run.started_at} /></td><td><${When} iso=${run.finished_at} /></td>
        <td>${run.trigger}</td>
        <td>${run.skip_reason ? `skipped: ${run.skip_reason}${run.skipped_count > 1 ? ` ×${run.skipped_count}` : ""}` : run.error || ""}
          ${run.progress && html` ${run.progress.done}/${run.progress.total ?? "?"} ${run.progress.unit}`}
          ${run.waiting_for && html` waiting for ${run.waiting_for}`}
          ${run.deadline_missed_at && html` <strong class="deadline-missed">deadline missed</strong>`}</td>
      </tr>`)}</tbody>
    </table>
    ${data.next_cursor && html`<p class="muted">The newest 100 matching runs are shown; narrow the filters to see older ones.</p>`}`}`;
}
