// Workflows (GET /workflows), one workflow with its runs (GET /workflows/{id}, GET /workflows/{id}/runs),
// and "run now" (POST /workflows/{id}/runs). The workflow run page is page-workflow-run.js.
import { useState } from "preact/hooks";
import { get, listAll, post, query } from "./api.js";
import { scheduleInWords } from "./format.js";
import { Dag } from "./dag.js";
import { Badge, ErrorBox, html, link, useAction, usePoll, When } from "./ui.js";

function RunNow({ workflow, onStarted }) {
  const action = useAction();
  const [started, setStarted] = useState(null);
  const start = () => action.run(async () => {
    const run = await post(`/workflows/${encodeURIComponent(workflow.id)}/runs`, {});
    setStarted(run.id);
    onStarted?.(run);
  });
  return html`<span class="actions">
    <button type="button" onClick=${start} disabled=${action.busy} aria-label=${"Run " + workflow.name + " now"}>Run now</button>
    ${started && html`<span role="status">Started <a href=${link("workflow-runs", started)}><code>${started}</code></a></span>`}
    <${ErrorBox} error=${action.error} />
  </span>`;
}

//: Workflows whose newest run the list reads (GET /workflows/{id}/runs, see newestRun).
export const LAST_RUNS_READ = 100;

// The workflow's newest run, or null. A page of GET /workflows/{id}/runs also examines the runs'
// node runs (not listed), so it may come back short with a cursor: ask for a node run per node plus
// the run itself, and follow the cursor at most twice more.
async function newestRun(workflow) {
  const limit = Math.min(200, workflow.nodes.length + 1);
  let cursor = null;
  for (let page = 0; page < 3; page++) {
    const found = await get(`/workflows/${encodeURIComponent(workflow.id)}/runs` + query({ limit, cursor }));
    if (found.items.length) return found.items[0];
    if (!found.next_cursor) return null;
    cursor = found.next_cursor;
  }
  return null;
}

export function Workflows() {
  const { data, error, reload } = usePoll(async () => {
    const workflows = await listAll("/workflows", {}, 1000);
    // The newest run of each of the first LAST_RUNS_READ workflows (one GET each).
    const last = await Promise.all(workflows.items.slice(0, LAST_RUNS_READ).map((w) => newestRun(w).catch(() => null)));
    return { ...workflows, last: Object.fromEntries(workflows.items.slice(0, LAST_RUNS_READ).map((w, i) => [w.id, last[i]])) };
  }, []);
  if (!data) return html`<h1>Workflows</h1><${ErrorBox} error=${error} />${!error && html`<p>Loading…</p>`}`;
  return html`<h1>Workflows</h1>
    <${ErrorBox} error=${error} />
    <p class="muted">DAGs of nodes, scheduled like jobs (<code>POST /workflows</code>, <code>jobsched workflows create</code>).
      Open one for its runs; open a run for its DAG with each node's state.</p>
    ${data.items.length === 0 ? html`<p>No workflows yet.</p>` : html`
    <table><caption class="sr-only">Workflows</caption>
      <thead><tr><th scope="col">Workflow</th><th scope="col">Schedule</th><th scope="col">Nodes</th>
        <th scope="col">Next fire time</th><th scope="col">Last run</th><th scope="col">State</th><th scope="col">Actions</th></tr></thead>
      <tbody>${data.items.map((w) => html`<tr key=${w.id}>
        <td><a href=${link("workflows", w.id)}>${w.name}</a><br /><code class="muted">${w.id}</code></td>
        <td>${scheduleInWords(w.schedule, w.timezone)}<br /><code>${w.schedule}</code></td>
        <td>${w.nodes.length}</td>
        <td>${w.next_fire_times[0] ? html`<${When} iso=${w.next_fire_times[0]} timezone=${w.timezone} />` : html`<span class="muted">none${w.state === "paused" ? " while paused" : ""}</span>`}</td>
        <td>${data.last[w.id] ? html`<a href=${link("workflow-runs", data.last[w.id].id)} aria-label=${`Last run of ${w.name}: ${data.last[w.id].state}`}><${Badge} state=${data.last[w.id].state} /></a>
          <br /><${When} iso=${data.last[w.id].scheduled_at} timezone=${w.timezone} />` : html`<span class="muted">none yet</span>`}</td>
        <td><${Badge} state=${w.state} />${w.paused_note && html`<div class="note">${w.paused_note}</div>`}</td>
        <td><${RunNow} workflow=${w} onStarted=${reload} /></td>
      </tr>`)}</tbody>
    </table>
    ${data.more && html`<p class="muted">The newest 1000 workflows are shown.</p>`}`}`;
}

export function WorkflowDetail({ id }) {
  const { data, error, reload } = usePoll(async () => {
    const path = `/workflows/${encodeURIComponent(id)}`;
    const [workflow, runs] = await Promise.all([get(path), listAll(path + "/runs", {}, 50)]);
    return { workflow, runs };
  }, [id]);
  if (error?.status === 404) {
    return html`<h1>Workflow not found</h1><p>No workflow <code>${id}</code> for your tenant.</p><p><a href="#/workflows">All workflows</a></p>`;
  }
  if (!data) return html`<h1>Workflow</h1><${ErrorBox} error=${error} />${!error && html`<p>Loading…</p>`}`;
  const { workflow: w, runs } = data;
  return html`<h1>${w.name} <${Badge} state=${w.state} /></h1>
    <${ErrorBox} error=${error} />
    <${RunNow} workflow=${w} onStarted=${reload} />
    <dl class="props">
      <dt>Id</dt><dd><code>${w.id}</code> (version ${w.version})</dd>
      <dt>Schedule</dt><dd>${scheduleInWords(w.schedule, w.timezone)} — <code>${w.schedule}</code></dd>
      <dt>Next fire times</dt><dd>${w.next_fire_times.length ? w.next_fire_times.slice(0, 3).map((t, i) => html`${i ? ", " : ""}<${When} iso=${t} timezone=${w.timezone} />`) : html`<span class="muted">none</span>`}</dd>
      ${w.description && html`<dt>Description</dt><dd>${w.description}</dd>`}
      ${w.paused_note && html`<dt>Paused</dt><dd>${w.paused_note}</dd>`}
    </dl>
    <h2>Nodes</h2>
    <${Dag} nodes=${w.nodes} label=${`The DAG of ${w.name}: ${w.nodes.length} nodes, parents left of their children`} />
    <table><caption class="sr-only">Nodes</caption>
      <thead><tr><th scope="col">Node</th><th scope="col">Target</th><th scope="col">Depends on</th><th scope="col">Trigger rule</th><th scope="col">Attempts at most</th></tr></thead>
      <tbody>${w.nodes.map((n) => html`<tr key=${n.id}><td><code>${n.id}</code></td>
        <td>${n.target?.handler || (n.target?.http ? `${n.target.http.method || "POST"} ${n.target.http.url}` : "—")}</td>
        <td>${n.depends_on.length ? n.depends_on.join(", ") : html`<span class="muted">—</span>`}</td>
        <td>${n.trigger_rule}</td><td>${n.retry?.max_attempts ?? "—"}</td></tr>`)}</tbody>
    </table>
    <h2>Workflow runs</h2>
    ${runs.items.length === 0 ? html`<p class="muted">No workflow runs yet.</p>` : html`
    <table><caption class="sr-only">Workflow runs, newest first</caption>
      <thead><tr><th scope="col">Workflow run</th><th scope="col">State</th><th scope="col">Scheduled</th><th scope="col">Started</th>
        <th scope="col">Finished</th><th scope="col">Trigger</th><th scope="col">Error</th></tr></thead>
      <tbody>${runs.items.map((r) => html`<tr key=${r.id}>
        <td><a href=${link("workflow-runs", r.id)}><code>${r.id}</code></a></td><td><${Badge} state=${r.state} /></td>
        <td><${When} iso=${r.scheduled_at} timezone=${w.timezone} /></td><td><${When} iso=${r.started_at} timezone=${w.timezone} /></td>
        <td><${When} iso=${r.finished_at} timezone=${w.timezone} /></td><td>${r.trigger}</td>
        <td>${r.skip_reason ? `skipped: ${r.skip_reason}` : r.error || ""}</td></tr>`)}</tbody>
    </table>
    ${runs.more && html`<p class="muted">The newest 50 workflow runs are shown.</p>`}`}`;
}
