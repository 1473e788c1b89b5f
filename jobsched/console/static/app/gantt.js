// A workflow run's timeline: one row per node, its node run's phases (GET /workflow-runs/{id}: each
// node's `phases`, decision 0064) — queued, waiting for a limit, running (an attempt, coloured by the
// node's state) and retrying (the backoff between attempts) — after a thin line from when it could
// start (its parents ended, or the workflow run started for a root). The numbers are in the table.
import { seconds } from "./format.js";
import { html, When } from "./ui.js";

const ms = (iso) => (iso ? new Date(iso).getTime() : null);
export const PHASES = ["queued", "waiting", "running", "retrying"];
const PHASE_WORDS = { queued: "queued", waiting: "waiting for a limit", running: "running", retrying: "retrying (backoff)" };

export function timeline(run, now) {
  const byId = Object.fromEntries(run.nodes.map((n) => [n.id, n]));
  const start = ms(run.started_at) ?? ms(run.scheduled_at);
  const rows = run.nodes.map((n) => {
    const parents = n.depends_on.map((p) => ms(byId[p]?.finished_at));
    const ready = n.depends_on.length ? (parents.every((t) => t !== null) ? Math.max(...parents) : null) : start;
    const phases = (n.phases || []).map((p) => ({ ...p, from: ms(p.start), to: ms(p.end) ?? now, open: p.end === null }));
    const total = Object.fromEntries(PHASES.map((k) => [k, null]));
    for (const p of phases) total[p.phase] = (total[p.phase] ?? 0) + Math.max(0, p.to - p.from);
    return { node: n, ready, phases, total, running: n.started_at !== null && n.finished_at === null };
  });
  const times = rows.flatMap((r) => [r.ready, ...r.phases.flatMap((p) => [p.from, p.to])]).filter((t) => t !== null);
  return { rows, from: Math.min(start, ...times), to: Math.max(start + 1000, ...times) };
}

const WIDTH = 760, LABEL = 140, ROW = 24;

function Legend() {
  return html`<ul class="gantt-legend" aria-label="Phases">
    ${PHASES.map((k) => html`<li><svg width="14" height="14" aria-hidden="true"><rect class=${"gantt-" + k} width="14" height="14" /></svg> ${PHASE_WORDS[k]}</li>`)}
  </ul>`;
}

export function Gantt({ run, now }) {
  const { rows, from, to } = timeline(run, now);
  const x = (t) => LABEL + ((t - from) / (to - from)) * (WIDTH - LABEL - 10);
  const span = (a, b) => (a === null || b === null ? "—" : seconds(Math.max(0, b - a) / 1000));
  const sum = (v) => (v === null ? "—" : seconds(v / 1000));
  const height = rows.length * ROW + 24;
  return html`<figure>
    <svg class="gantt" width=${WIDTH} height=${height} role="img"
      aria-label=${`Timeline of workflow run ${run.id}: per node, its phases (queued, waiting for a limit, running, retrying); the numbers are in the table below`}>
      ${rows.map((r, i) => html`<g>
        <text x="4" y=${i * ROW + 16} class="gantt-label">${r.node.id}</text>
        ${r.ready !== null && r.phases.length > 0 && r.phases[0].from > r.ready && html`<line class="gantt-ready"
          x1=${x(r.ready)} x2=${x(r.phases[0].from)} y1=${i * ROW + 12} y2=${i * ROW + 12}><title>${r.node.id}: could start ${span(r.ready, r.phases[0].from)} before it was queued</title></line>`}
        ${r.phases.map((p) => html`<rect class=${"gantt-" + p.phase + (p.phase === "running" ? " gantt-run state-" + r.node.state : "")}
          x=${x(p.from)} y=${i * ROW + 5} width=${Math.max(2, x(p.to) - x(p.from))} height="14">
          <title>${r.node.id}: ${PHASE_WORDS[p.phase]} ${p.open ? "for" : ""} ${span(p.from, p.to)}${p.open ? " so far" : ""} (attempt ${p.attempt})</title></rect>`)}
      </g>`)}
      <text x=${LABEL} y=${height - 4} class="gantt-axis">${new Date(from).toLocaleTimeString()}</text>
      <text x=${WIDTH - 10} y=${height - 4} class="gantt-axis" text-anchor="end">${new Date(to).toLocaleTimeString()}</text>
    </svg>
    <figcaption class="muted"><${Legend} />Running is coloured by the node's state; a thin line: its parents had ended, its run was not queued yet.</figcaption>
  </figure>
  <table id="gantt-table"><caption class="sr-only">Timeline of the nodes</caption>
    <thead><tr><th scope="col">Node</th><th scope="col">Could start</th><th scope="col">Started</th><th scope="col">Ended</th>
      ${PHASES.map((k) => html`<th scope="col" class="num">${PHASE_WORDS[k]}</th>`)}<th scope="col" class="num">Attempts</th></tr></thead>
    <tbody>${rows.map((r) => html`<tr><th scope="row"><code>${r.node.id}</code></th>
      <td><${When} iso=${r.ready === null ? null : new Date(r.ready).toISOString()} /></td><td><${When} iso=${r.node.started_at} /></td>
      <td>${r.running ? "running" : html`<${When} iso=${r.node.finished_at} />`}</td>
      ${PHASES.map((k) => html`<td class="num">${sum(r.total[k])}</td>`)}<td class="num">${r.node.attempt}</td></tr>`)}</tbody>
  </table>`;
}
