// A workflow run's timeline: one row per node, from when it could start (its parents ended, or the
// workflow run started for a root) to when it started (waiting: queued, held by a limit or backing
// off between attempts) and then until it ended (running, or running now). From GET /workflow-runs/{id}
// alone: each node's started_at / finished_at (its first attempt's start, its last attempt's end).
import { seconds } from "./format.js";
import { html, When } from "./ui.js";

const ms = (iso) => (iso ? new Date(iso).getTime() : null);

export function timeline(run, now) {
  const byId = Object.fromEntries(run.nodes.map((n) => [n.id, n]));
  const start = ms(run.started_at) ?? ms(run.scheduled_at);
  const rows = run.nodes.map((n) => {
    const parents = n.depends_on.map((p) => ms(byId[p]?.finished_at));
    const ready = n.depends_on.length ? (parents.every((t) => t !== null) ? Math.max(...parents) : null) : start;
    const started = ms(n.started_at);
    const ended = ms(n.finished_at) ?? (started !== null ? now : null);
    return { node: n, ready, started, ended, running: started !== null && n.finished_at === null };
  });
  const times = rows.flatMap((r) => [r.ready, r.started, r.ended]).filter((t) => t !== null);
  return { rows, from: Math.min(start, ...times), to: Math.max(start + 1000, ...times) };
}

const WIDTH = 760, LABEL = 140, ROW = 24;

export function Gantt({ run, now }) {
  const { rows, from, to } = timeline(run, now);
  const x = (t) => LABEL + ((t - from) / (to - from)) * (WIDTH - LABEL - 10);
  const span = (a, b) => (a === null || b === null ? "—" : seconds(Math.max(0, b - a) / 1000));
  const height = rows.length * ROW + 24;
  return html`<figure>
    <svg class="gantt" width=${WIDTH} height=${height} role="img"
      aria-label=${`Timeline of workflow run ${run.id}: per node, waiting before it started and running until it ended; the numbers are in the table below`}>
      ${rows.map((r, i) => html`<g>
        <text x="4" y=${i * ROW + 16} class="gantt-label">${r.node.id}</text>
        ${r.ready !== null && r.started !== null && html`<rect class="gantt-wait" x=${x(r.ready)} y=${i * ROW + 5} width=${Math.max(1, x(r.started) - x(r.ready))} height="14">
          <title>${r.node.id}: waited ${span(r.ready, r.started)}</title></rect>`}
        ${r.started !== null && html`<rect class=${"gantt-run state-" + r.node.state} x=${x(r.started)} y=${i * ROW + 5} width=${Math.max(2, x(r.ended) - x(r.started))} height="14">
          <title>${r.node.id}: ${r.running ? "running for" : "ran"} ${span(r.started, r.ended)} (${r.node.state}, attempt ${r.node.attempt})</title></rect>`}
      </g>`)}
      <text x=${LABEL} y=${height - 4} class="gantt-axis">${new Date(from).toLocaleTimeString()}</text>
      <text x=${WIDTH - 10} y=${height - 4} class="gantt-axis" text-anchor="end">${new Date(to).toLocaleTimeString()}</text>
    </svg>
    <figcaption class="muted">Light: waiting to start (queued, held by a limit, or backing off between attempts); solid: from its first attempt's start to its end, coloured by state.</figcaption>
  </figure>
  <table id="gantt-table"><caption class="sr-only">Timeline of the nodes</caption>
    <thead><tr><th scope="col">Node</th><th scope="col">Could start</th><th scope="col">Started</th><th scope="col">Ended</th>
      <th scope="col" class="num">Waited</th><th scope="col" class="num">Ran</th><th scope="col" class="num">Attempts</th></tr></thead>
    <tbody>${rows.map((r) => html`<tr><th scope="row"><code>${r.node.id}</code></th>
      <td><${When} iso=${r.ready === null ? null : new Date(r.ready).toISOString()} /></td><td><${When} iso=${r.node.started_at} /></td>
      <td>${r.running ? "running" : html`<${When} iso=${r.node.finished_at} />`}</td>
      <td class="num">${span(r.ready, r.started)}</td><td class="num">${span(r.started, r.ended)}</td><td class="num">${r.node.attempt}</td></tr>`)}</tbody>
  </table>`;
}
