// One workflow run (GET /workflow-runs/{id}): its DAG with each node's state, the selected node's run
// (GET /runs/{node run id}: attempts, error, output), cancel and retry from failed.
import { get, post } from "./api.js";
import { Dag } from "./dag.js";
import { Gantt } from "./gantt.js";
import { Badge, ErrorBox, html, Json, link, setParams, useAction, usePoll, When } from "./ui.js";

function Output({ value }) {
  if (value === null || value === undefined) return html`<p class="muted">No output.</p>`;
  if (typeof value === "object" && "ref" in value && Object.keys(value).length === 1) {
    return html`<p>Kept in S3 as <code>${value.ref}</code> (the node's run page reads it).</p>`;
  }
  return html`<${Json} value=${value} label="Node output" />`;
}

function NodePanel({ node }) {
  const { data: run, error } = usePoll(
    () => (node.run_id ? get(`/runs/${encodeURIComponent(node.run_id)}`) : Promise.resolve(null)), [node.run_id]);
  return html`<section class="node-panel" aria-labelledby="node-h">
    <h2 id="node-h">Node <code>${node.id}</code> <${Badge} state=${node.state} /></h2>
    <dl class="props">
      <dt>Depends on</dt><dd>${node.depends_on.length ? node.depends_on.join(", ") : html`<span class="muted">nothing (starts with the workflow run)</span>`}</dd>
      <dt>Trigger rule</dt><dd>${node.trigger_rule}</dd>
      <dt>Node run</dt><dd>${node.run_id ? html`<a href=${link("runs", node.run_id)}><code>${node.run_id}</code></a>` : html`<span class="muted">none yet (pending)</span>`}</dd>
      <dt>Attempt</dt><dd>${node.attempt}</dd>
      <dt>Started</dt><dd><${When} iso=${node.started_at} /></dd>
      <dt>Finished</dt><dd><${When} iso=${node.finished_at} /></dd>
      ${node.error && html`<dt>Error</dt><dd class="error-text">${node.error}</dd>`}
    </dl>
    <h3>Attempts</h3>
    <${ErrorBox} error=${error} />
    ${!node.run_id ? html`<p class="muted">No attempt: the node has not started.</p>`
      : !run ? !error && html`<p>Loading…</p>`
      : run.attempts.length ? html`<table><caption class="sr-only">Attempts of node ${node.id}</caption>
        <thead><tr><th scope="col">#</th><th scope="col">Started</th><th scope="col">Finished</th><th scope="col">Outcome</th><th scope="col">Error</th></tr></thead>
        <tbody>${run.attempts.map((a) => html`<tr><td>${a.attempt}</td><td><${When} iso=${a.started_at} /></td>
          <td><${When} iso=${a.finished_at} /></td><td>${a.outcome || "—"}</td><td>${a.error || ""}</td></tr>`)}</tbody></table>`
      : html`<p class="muted">No attempt yet.</p>`}
    ${run?.replays?.length > 0 && html`<p>Replays of this node's run: ${run.replays.map((r) => `${r.action} at ${r.at}`).join("; ")}.</p>`}
    <h3>Output</h3>
    <${Output} value=${node.output} />
  </section>`;
}

function counts(nodes) {
  const by = {};
  for (const n of nodes) by[n.state] = (by[n.state] || 0) + 1;
  return Object.entries(by).map(([s, n]) => `${n} ${s.replace("_", " ")}`).join(", ");
}

export function WorkflowRunDetail({ id, params }) {
  const { data: run, error, reload } = usePoll(() => get(`/workflow-runs/${encodeURIComponent(id)}`), [id]);
  const action = useAction();
  if (error?.status === 404) {
    return html`<h1>Workflow run not found</h1><p>No workflow run <code>${id}</code> for your tenant.</p><p><a href="#/workflows">All workflows</a></p>`;
  }
  if (!run) return html`<h1>Workflow run</h1><${ErrorBox} error=${error} />${!error && html`<p>Loading…</p>`}`;
  const selectedId = params.get("node") || "";
  const selected = run.nodes.find((n) => n.id === selectedId) || null;
  const select = (node) => setParams("workflow-runs/" + encodeURIComponent(run.id), { node: node === selectedId ? "" : node });
  const act = (verb) => action.run(async () => { await post(`/workflow-runs/${encodeURIComponent(run.id)}/${verb}`, {}); await reload(); });
  const cancellable = ["queued", "running"].includes(run.state) && !run.cancel_requested;
  return html`<h1>Workflow run <code>${run.id}</code> <${Badge} state=${run.state} /></h1>
    <${ErrorBox} error=${error} />
    <div class="actions">
      ${cancellable && html`<button type="button" class="danger" onClick=${() => act("cancel")} disabled=${action.busy}>Cancel workflow run</button>`}
      ${run.state === "failed" && html`<button type="button" onClick=${() => act("retry")} disabled=${action.busy}>Retry from failed nodes</button>`}
      ${run.cancel_requested && run.state === "running" && html`<span role="status">Cancel requested: running nodes stop at their next heartbeat.</span>`}
    </div>
    <${ErrorBox} error=${action.error} />
    <dl class="props">
      <dt>Workflow</dt><dd><a href=${link("workflows", run.workflow_id)}><code>${run.workflow_id}</code></a></dd>
      <dt>Trigger</dt><dd>${run.trigger}</dd>
      <dt>Scheduled</dt><dd><${When} iso=${run.scheduled_at} /></dd>
      <dt>Started</dt><dd><${When} iso=${run.started_at} /></dd>
      <dt>Finished</dt><dd><${When} iso=${run.finished_at} /></dd>
      <dt>Nodes</dt><dd id="node-counts">${counts(run.nodes)}</dd>
      ${run.error && html`<dt>Error</dt><dd class="error-text">${run.error}</dd>`}
    </dl>
    <h2>DAG</h2>
    <p class="muted">Each node shows its state; choose one (click, or Tab to it and press Enter) for its run.</p>
    <div class="dag-layout">
      <${Dag} nodes=${run.nodes} selected=${selectedId} onSelect=${select}
        label=${`The DAG of workflow run ${run.id}, parents left of their children: ${counts(run.nodes)}`} />
      ${selected && html`<${NodePanel} key=${selected.id} node=${selected} />`}
    </div>
    <h2>Timeline</h2>
    <${Gantt} run=${run} now=${Date.now()} />
    <h2>Nodes</h2>
    <table><caption class="sr-only">Nodes and their states</caption>
      <thead><tr><th scope="col">Node</th><th scope="col">State</th><th scope="col">Depends on</th><th scope="col">Attempt</th><th scope="col">Error</th></tr></thead>
      <tbody>${run.nodes.map((n) => html`<tr key=${n.id}>
        <td><a href=${`#/workflow-runs/${encodeURIComponent(run.id)}?node=${encodeURIComponent(n.id)}`}><code>${n.id}</code></a></td>
        <td><${Badge} state=${n.state} /></td><td>${n.depends_on.join(", ")}</td><td>${n.attempt}</td><td>${n.error || ""}</td></tr>`)}</tbody>
    </table>
    ${run.retries.length > 0 && html`<h2>Retries</h2>
      <table><caption class="sr-only">Retries from failed nodes</caption>
        <thead><tr><th scope="col">At</th><th scope="col">Failed nodes replayed</th><th scope="col">Nodes reset to pending</th></tr></thead>
        <tbody>${run.retries.map((r) => html`<tr><td><${When} iso=${r.at} /></td><td>${(r.failed || []).join(", ")}</td><td>${(r.reset || []).join(", ") || "—"}</td></tr>`)}</tbody></table>`}`;
}
