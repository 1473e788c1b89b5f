// "Limits in use" on the Overview: the tenant's limits (GET /limits), the jobs' own concurrency and
// rate limits (GET /jobs), and what is in use now, as far as the API lists it: running runs
// (GET /runs?state=running, plus the running nodes of running workflow runs, GET /workflow-runs/{id}),
// runs waiting for a limit (waiting_for of GET /runs?state=queued and ?state=retrying) and today's
// usage (GET /usage).
import { get, listAll, query } from "./api.js";
import { html } from "./ui.js";

//: Running workflow runs whose nodes are read for the running count (one GET each).
export const MAX_WORKFLOW_RUNS_READ = 20;

export async function loadLimits(now) {
  const today = new Date(now).toISOString().slice(0, 10);
  const [tenant, jobs, running, queued, retrying, usage] = await Promise.all([
    get("/limits"),
    listAll("/jobs", {}, 1000),
    listAll("/runs", { state: "running" }, 1000),
    listAll("/runs", { state: "queued" }, 1000),
    listAll("/runs", { state: "retrying" }, 1000),
    get("/usage" + query({ from: today, to: today })),
  ]);
  const workflowIds = new Set(jobs.items.filter((j) => j.target?.workflow).map((j) => j.id));
  // A workflow run holds no slot while its nodes run, a chunked run (progress in chunks) none while its
  // chunks run (docs/semantics/limits.md): neither is counted; a workflow run's running nodes are.
  const plainRunning = running.items.filter((r) => !workflowIds.has(r.job_id) && r.progress?.unit !== "chunks");
  const workflowRuns = running.items.filter((r) => workflowIds.has(r.job_id));
  const read = await Promise.all(workflowRuns.slice(0, MAX_WORKFLOW_RUNS_READ)
    .map((r) => get(`/workflow-runs/${encodeURIComponent(r.id)}`).catch(() => null)));
  const runningNodes = read.filter(Boolean).reduce((n, w) => n + w.nodes.filter((x) => x.state === "running").length, 0);
  const waiting = {};
  for (const run of [...queued.items, ...retrying.items]) {
    if (run.waiting_for) waiting[run.waiting_for] = (waiting[run.waiting_for] || 0) + 1;
  }
  // The jobs' own limits, one row per (kind, key): the jobs that name it, their running runs.
  const keys = new Map();
  const add = (kind, key, job, limitText) => {
    const id = kind + ":" + key;
    if (!keys.has(id)) keys.set(id, { kind, key, jobs: [], limits: new Set() });
    keys.get(id).jobs.push(job.id);
    keys.get(id).limits.add(limitText);
  };
  for (const job of jobs.items) {
    if (job.concurrency?.limit) add("concurrency", job.concurrency.key, job, `${job.concurrency.limit} at once`);
    if (job.rate_limit?.per_second) add("rate", job.rate_limit.key, job, `${job.rate_limit.per_second} per second, burst ${job.rate_limit.burst ?? 1}`);
  }
  const rows = [...keys.values()].map((row) => {
    const members = new Set(row.jobs);
    return { ...row, limits: [...row.limits], running: plainRunning.filter((r) => members.has(r.job_id)).length,
      waiting: waiting[row.kind + ":" + row.key] || 0 };
  }).sort((a, b) => (a.kind + a.key).localeCompare(b.kind + b.key));
  const day = usage.items.find((d) => d.day === today) || null;
  return {
    tenant, rows, day, waiting,
    running: plainRunning.length + runningNodes,
    runningNodes,
    workflowRunsUnread: Math.max(0, workflowRuns.length - MAX_WORKFLOW_RUNS_READ),
    more: running.more || queued.more || retrying.more || jobs.more,
  };
}

const source = (tenant, name) => (tenant.source?.[name] === "tenant" ? "set for your tenant" : "the deployment's default");

export function LimitsInUse({ limits }) {
  const { tenant, rows, day, waiting } = limits;
  const maxRunning = tenant.max_running;
  const rate = tenant.runs_per_second;
  const perMinute = rate ? Math.floor(rate * 60 + (tenant.burst || 1)) : null;
  return html`<section aria-labelledby="limits-h"><h2 id="limits-h">Limits in use</h2>
    <table id="tenant-limits"><caption class="sr-only">Your tenant's limits and what is in use now</caption>
      <thead><tr><th scope="col">Limit</th><th scope="col">Value</th><th scope="col">In use now</th><th scope="col">Runs waiting for it</th></tr></thead>
      <tbody>
        <tr><th scope="row">Runs executing at once (tenant)</th>
          <td>${maxRunning ? html`${maxRunning} <span class="muted">(${source(tenant, "max_running")})</span>` : html`no limit`}</td>
          <td>${maxRunning ? html`<meter min="0" max=${maxRunning} value=${Math.min(limits.running, maxRunning)}
              aria-label="Runs executing of the tenant's limit"></meter> ` : ""}${limits.running}${maxRunning ? ` of ${maxRunning}` : ""} running${limits.runningNodes ? ` (${limits.runningNodes} of them workflow nodes)` : ""}</td>
          <td>${waiting["concurrency:@tenant"] || 0}</td></tr>
        <tr><th scope="row">Runs started per second (tenant)</th>
          <td>${rate ? html`${rate} per second, burst ${tenant.burst ?? 1} <span class="muted">(${source(tenant, "runs_per_second")})</span>` : html`no limit`}</td>
          <td>${limits.startedLastMinute} started in the last minute${perMinute ? ` (at most ${perMinute} allowed)` : ""}</td>
          <td>${waiting["rate:@tenant"] || 0}</td></tr>
      </tbody>
    </table>
    ${rows.length > 0 && html`<h3>Jobs' own limits</h3>
    <table id="key-limits"><caption class="sr-only">Concurrency and rate limits the jobs declare, by key</caption>
      <thead><tr><th scope="col">Kind</th><th scope="col">Key</th><th scope="col">Limit</th><th scope="col">Jobs naming it</th>
        <th scope="col">Running now</th><th scope="col">Runs waiting for it</th></tr></thead>
      <tbody>${rows.map((r) => html`<tr key=${r.kind + r.key}><td>${r.kind}</td><td><code>${r.key}</code></td><td>${r.limits.join("; ")}</td>
        <td>${r.jobs.length}</td><td>${r.running}</td><td>${r.waiting}</td></tr>`)}</tbody>
    </table>`}
    <p class="muted">${day
      ? `Today (UTC, GET /usage): ${day.runs_started} attempt${day.runs_started === 1 ? "" : "s"} started, ${day.throttled_waits} ${day.throttled_waits === 1 ? "delivery" : "deliveries"} held back by a limit.`
      : "Today (UTC, GET /usage): nothing counted yet."}
      ${limits.more ? " Only the first 1000 of a list are counted." : ""}
      ${limits.workflowRunsUnread ? ` The nodes of ${limits.workflowRunsUnread} more running workflow runs are not counted.` : ""}</p>
  </section>`;
}
