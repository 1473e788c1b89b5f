// Overview: this tenant's runs over the last hour, day or week (GET /stats: runs per bucket by
// outcome, start lag p50/p99, dead letters by when they were dead-lettered), what is in flight now by
// priority (GET /runs?state=, read from the in-flight ledger), dead letters, the limits in use
// (limits.js), and for administrators the run queues' depth over the range (GET /stats/queues). Each
// chart has its numbers in a table beside it.
import { useEffect, useRef } from "preact/hooks";
import { get, listAll, query } from "./api.js";
import { seconds } from "./format.js";
import { ErrorBox, html, setParams, usePoll, useRoute } from "./ui.js";
import { LimitsInUse, loadLimits } from "./limits.js";
import { NextHour } from "./forecast.js";
import { Budget } from "./budget.js";

export const STATES = ["queued", "running", "retrying", "succeeded", "failed", "cancelled", "skipped"];
export const OUTCOMES = ["succeeded", "failed", "cancelled", "skipped", "dead_lettered"];
const COLOURS = { runs_started: "#0b5cad", run_seconds: "#6f42c1", succeeded: "#1a6b32", failed: "#a4161a", cancelled: "#4a5360", skipped: "#8a6d3b",
  dead_lettered: "#6f42c1", dead_letters: "#a4161a", lag_p50: "#0b5cad", lag_p99: "#7a4d00",
  high: "#a4161a", default: "#0b5cad", low: "#1a6b32", long: "#7a4d00", container: "#6f42c1" };
const MINUTE = 60 * 1000;
//: The ranges of the picker: how far back, the bucket asked of GET /stats, how often it refreshes.
export const RANGES = {
  hour: { label: "Last hour", span: 60 * MINUTE, bucket: "minute", every: 5000 },
  day: { label: "Last day", span: 1440 * MINUTE, bucket: "hour", every: 30000 },
  week: { label: "Last week", span: 7 * 1440 * MINUTE, bucket: "hour", every: 60000 },
};
const PRIORITIES = ["high", "default", "low"];
//: Runs started in the last minute (the rate limit's use) are counted from the runs scheduled since:
const STARTED_WINDOW = 5 * MINUTE;

// What is in flight now, per priority: queued (due / ahead of their due time), running, retrying.
export function inFlight(queued, running, retrying, now) {
  const rows = Object.fromEntries(PRIORITIES.map((p) => [p, { due: 0, ahead: 0, running: 0, retrying: 0 }]));
  const row = (run) => (rows[run.priority] ||= { due: 0, ahead: 0, running: 0, retrying: 0 });
  for (const run of queued) row(run)[new Date(run.scheduled_at).getTime() > now ? "ahead" : "due"]++;
  for (const run of running) row(run).running++;
  for (const run of retrying) row(run).retrying++;
  return rows;
}

export function totals(buckets) {
  const sum = Object.fromEntries(OUTCOMES.map((o) => [o, 0]));
  for (const b of buckets) for (const o of OUTCOMES) sum[o] += b[o];
  return sum;
}

const bucketLabel = (iso, bucket) => {
  const at = new Date(iso);
  const day = at.toLocaleDateString(undefined, { weekday: "short", day: "numeric", month: "short" });
  const time = at.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" });
  return bucket === "day" ? day : bucket === "hour" ? `${day} ${time}` : time;
};
const lagText = (value) => (value === null ? "—" : value >= 86400 ? "≥ 1 day" : "≤ " + seconds(value));

function Chart({ label, series, xs, ys, unit }) {
  const box = useRef(null);
  const plot = useRef(null);
  useEffect(() => {
    if (!box.current || !globalThis.uPlot) return;
    const data = [xs, ...ys];
    if (plot.current && plot.current.series.length !== series.length + 1) { plot.current.destroy(); plot.current = null; }
    if (!plot.current) {
      const width = Math.max(320, Math.min(1100, box.current.clientWidth || 800));
      plot.current = new uPlot({
        width, height: 220, scales: { x: { time: true } },
        axes: [{ stroke: "#1b1f24" }, { stroke: "#1b1f24", label: unit, size: 70 }],
        series: [{}, ...series.map((s) => ({ label: s, stroke: COLOURS[s], width: 2, points: { show: xs.length <= 200, size: 4 } }))],
      }, data, box.current);
    } else {
      plot.current.setData(data);
    }
  }, [xs, ys]);
  useEffect(() => () => { plot.current?.destroy(); plot.current = null; }, []);
  return html`<div ref=${box} class="chart" role="img" aria-label=${label}></div>`;
}

function ActivityTable({ stats, id }) {
  return html`<details><summary>The numbers, one row per ${stats.bucket}</summary>
    <div class="scroll" tabindex="0" role="region" aria-label=${"Runs per " + stats.bucket + ", table"}><table id=${id}><caption class="sr-only">Runs per ${stats.bucket} by outcome, and start lag</caption>
      <thead><tr><th scope="col">${stats.bucket} from</th>${OUTCOMES.map((o) => html`<th scope="col" class="num">${o.replace("_", " ")}</th>`)}
        <th scope="col" class="num">lag p50</th><th scope="col" class="num">lag p99</th><th scope="col" class="num">into the dead letters</th></tr></thead>
      <tbody>${stats.buckets.map((b) => html`<tr><th scope="row"><time datetime=${b.start}>${bucketLabel(b.start, stats.bucket)}</time></th>
        ${OUTCOMES.map((o) => html`<td class="num">${b[o]}</td>`)}
        <td class="num">${lagText(b.lag_p50)}</td><td class="num">${lagText(b.lag_p99)}</td><td class="num">${b.dead_letters}</td></tr>`)}</tbody>
    </table></div></details>`;
}

function RangePicker({ range }) {
  return html`<fieldset class="range"><legend>Range</legend>
    ${Object.entries(RANGES).map(([key, r]) => html`<label class="choice">
      <input type="radio" name="range" value=${key} checked=${range === key}
        onChange=${() => setParams("overview", { range: key === "hour" ? "" : key })} /> ${r.label}</label>`)}
  </fieldset>`;
}

// What is in flight now, the dead letters and the limits: every POLL_MS, whatever the range.
async function loadNow(span) {
  const now = Date.now();
  const [queued, running, retrying, recent, dead, limits] = await Promise.all([
    listAll("/runs", { state: "queued" }, 1000),
    listAll("/runs", { state: "running" }, 1000),
    listAll("/runs", { state: "retrying" }, 1000),
    listAll("/runs", { since: new Date(now - STARTED_WINDOW).toISOString() }, 2000),
    listAll("/dead-letters", {}, 1000),
    loadLimits(now),
  ]);
  limits.startedLastMinute = recent.items.filter((r) => r.started_at && new Date(r.started_at).getTime() >= now - MINUTE).length;
  const deadInRange = dead.items.filter((d) => d.failed_at && new Date(d.failed_at).getTime() >= now - span).length;
  return { dead, deadInRange, limits, flight: inFlight(queued.items, running.items, retrying.items, now),
    more: queued.more || running.more || retrying.more };
}

// The range's buckets (GET /stats): one small read, refreshed as often as the range's buckets change.
function loadStats(range) {
  const now = Date.now();
  return get("/stats" + query({ from: new Date(now - range.span).toISOString(), to: new Date(now).toISOString(), bucket: range.bucket }));
}

function NowSection({ now, rangeWords }) {
  const { flight, dead, deadInRange } = now;
  const all = Object.values(flight);
  const total = (k) => all.reduce((n, r) => n + r[k], 0);
  return html`<section aria-labelledby="now-h"><h2 id="now-h">Now</h2>
      <div class="cards">
        <div class="card"><div class="figure">${total("running")}</div><div class="label">running (concurrency in use)</div></div>
        <div class="card"><div class="figure">${total("due")}</div><div class="label">queued and due (your backlog)</div></div>
        <div class="card"><div class="figure">${total("retrying")}</div><div class="label">waiting out a retry backoff</div></div>
        <div class="card"><div class="figure">${total("ahead")}</div><div class="label">queued ahead of their due time</div></div>
        <div class="card"><div class="figure"><a href="#/dead-letters">${dead.items.length}${dead.more ? "+" : ""}</a></div>
          <div class="label">dead letters (${deadInRange} in the ${rangeWords})</div></div>
      </div>
      <table id="queue-depth"><caption>In flight now, by priority${now.more ? " (the first 1000 of each state)" : ""}</caption>
        <thead><tr><th scope="col">priority</th><th scope="col" class="num">queued and due</th><th scope="col" class="num">queued ahead</th>
          <th scope="col" class="num">running</th><th scope="col" class="num">retrying</th></tr></thead>
        <tbody>${Object.entries(flight).map(([p, r]) => html`<tr><th scope="row">${p}</th><td class="num">${r.due}</td>
          <td class="num">${r.ahead}</td><td class="num">${r.running}</td><td class="num">${r.retrying}</td></tr>`)}</tbody>
      </table>
    </section>
    <${LimitsInUse} limits=${now.limits} />`;
}

//: Days of usage shown (GET /usage answers at most 31 per call).
const USAGE_DAYS = 7;
const USAGE_EVERY = 60000;

function loadUsage() {
  const today = new Date();
  const first = new Date(today.getTime() - (USAGE_DAYS - 1) * 1440 * MINUTE);
  const day = (d) => d.toISOString().slice(0, 10);
  return get("/usage" + query({ from: day(first), to: day(today) })).then((answer) => {
    const byDay = Object.fromEntries(answer.items.map((u) => [u.day, u]));
    const days = [];
    for (let t = new Date(answer.first_day + "T00:00:00Z"); day(t) <= answer.last_day; t = new Date(t.getTime() + 1440 * MINUTE)) {
      days.push(byDay[day(t)] || { day: day(t), runs_started: 0, run_seconds: 0, sfn_transitions: 0, sns_publishes: 0,
        fargate_vcpu_seconds: 0, estimated_usd: 0 });
    }
    return days;
  });
}

// Usage per UTC day (GET /usage, what the workers counted: docs/semantics/limits.md): runs started and
// the seconds they ran as a chart; in the table under it, the chunked runs' Step Functions transitions,
// the SNS publishes, the container pool's Fargate vCPU-seconds and the estimated cost.
function Usage() {
  const { data: days, error } = usePoll(loadUsage, [], USAGE_EVERY);
  if (!days) return html`<${ErrorBox} error=${error} />${!error && html`<p>Loading…</p>`}`;
  const xs = days.map((d) => new Date(d.day + "T00:00:00Z").getTime() / 1000);
  return html`<${ErrorBox} error=${error} />
    <figure>
      <${Chart} label=${`Runs started and run-seconds per day over the last ${USAGE_DAYS} days; the numbers are in the table below`}
        series=${["runs_started", "run_seconds"]} xs=${xs} ys=${[days.map((d) => d.runs_started), days.map((d) => d.run_seconds)]} unit="per UTC day" />
      <figcaption class="muted">Attempts the workers started, and the seconds their handlers ran, per UTC day (GET /usage).</figcaption>
    </figure>
    <table id="usage-table"><caption class="sr-only">Usage per UTC day</caption>
      <thead><tr><th scope="col">day (UTC)</th><th scope="col" class="num">runs started</th><th scope="col" class="num">run-seconds</th>
        <th scope="col" class="num">state transitions</th><th scope="col" class="num">SNS publishes</th>
        <th scope="col" class="num">Fargate vCPU-seconds</th><th scope="col" class="num">estimated cost (USD)</th></tr></thead>
      <tbody>${days.map((d) => html`<tr><th scope="row"><time datetime=${d.day}>${d.day}</time></th><td class="num">${d.runs_started}</td>
        <td class="num">${d.run_seconds.toFixed(1)}</td><td class="num">${Math.round(d.sfn_transitions || 0)}</td>
        <td class="num">${Math.round(d.sns_publishes || 0)}</td><td class="num">${(d.fargate_vcpu_seconds || 0).toFixed(1)}</td>
        <td class="num">${d.estimated_usd.toFixed(6)}</td></tr>`)}</tbody>
    </table>`;
}

export function Overview() {
  const { params } = useRoute();
  const rangeKey = RANGES[params.get("range")] ? params.get("range") : "hour";
  const range = RANGES[rangeKey];
  const rangeWords = range.label.toLowerCase();
  const now = usePoll(() => loadNow(range.span), [rangeKey]);
  const { data: stats, error } = usePoll(() => loadStats(range), [rangeKey], range.every);
  return html`<h1>Overview</h1><${RangePicker} range=${rangeKey} />
    <${ErrorBox} error=${now.error} />
    ${now.data ? html`<${NowSection} now=${now.data} rangeWords=${rangeWords} />` : !now.error && html`<p>Loading…</p>`}
    <section aria-labelledby="activity-h"><h2 id="activity-h">${range.label}</h2>
      <${ErrorBox} error=${error} />
      ${stats ? html`<${Activity} stats=${stats} rangeWords=${rangeWords} />` : !error && html`<p>Loading…</p>`}
    </section>
    ${stats && html`<${DeadLetters} stats=${stats} rangeWords=${rangeWords} />`}
    <${QueueDepth} range=${range} rangeKey=${rangeKey} />
    <${NextHour} />
    <section aria-labelledby="usage-h"><h2 id="usage-h">Usage, last ${USAGE_DAYS} days</h2><${Usage} /></section>
    <section aria-labelledby="budget-h"><h2 id="budget-h">Budget</h2><${Budget} /></section>`;
}

function Activity({ stats, rangeWords }) {
  const xs = stats.buckets.map((b) => new Date(b.start).getTime() / 1000);
  const sum = totals(stats.buckets);
  const starts = stats.buckets.reduce((n, b) => n + b.lag_count, 0);
  return html`<table id="activity-totals"><caption class="sr-only">Runs due in the ${rangeWords} that have ended, by outcome</caption>
        <thead><tr>${OUTCOMES.map((o) => html`<th scope="col">${o.replace("_", " ")}</th>`)}</tr></thead>
        <tbody><tr>${OUTCOMES.map((o) => html`<td>${o === "dead_lettered" ? sum[o]
          : html`<a href=${"#/runs?state=" + o}>${sum[o]}</a>`}</td>`)}</tr></tbody>
      </table>
      <figure>
        <${Chart} label=${`Ended runs per ${stats.bucket} over the ${rangeWords}, one line per outcome; the numbers are in the table below`}
          series=${OUTCOMES} xs=${xs} ys=${OUTCOMES.map((o) => stats.buckets.map((b) => b[o]))} unit=${"runs per " + stats.bucket} />
        <figcaption class="muted">Runs per ${stats.bucket} of their due time, by how they ended (GET /stats).
          A run is counted once the sweeper has settled it, a few minutes after it ended: the newest ${stats.bucket === "minute" ? "minutes fill" : "bucket fills"} in as it does.</figcaption>
      </figure>
      <figure>
        <${Chart} label=${`Start lag per ${stats.bucket}, p50 and p99 in seconds; the numbers are in the table below`}
          series=${["lag_p50", "lag_p99"]} xs=${xs} ys=${["lag_p50", "lag_p99"].map((k) => stats.buckets.map((b) => b[k]))} unit="seconds (bin upper bound)" />
        <figcaption class="muted">Start lag of scheduled runs (started − due), p50 and p99: the upper bound of the
          histogram bin they fall in (${starts ? `${starts} starts counted` : "no start counted yet"}).</figcaption>
      </figure>

      <${ActivityTable} stats=${stats} id="activity-table" />`;
}

// Dead letters per bucket by when they went there (GET /stats ``dead_letters``), from the range's answer.
function DeadLetters({ stats, rangeWords }) {
  const xs = stats.buckets.map((b) => new Date(b.start).getTime() / 1000);
  return html`<section aria-labelledby="dead-h"><h2 id="dead-h">Dead letters over time</h2>
    <figure>
      <${Chart} label=${`Runs that went to the dead letters per ${stats.bucket} over the ${rangeWords}; the numbers are in the table above, column “into the dead letters”`}
        series=${["dead_letters"]} xs=${xs} ys=${[stats.buckets.map((b) => b.dead_letters)]} unit=${"per " + stats.bucket} />
      <figcaption class="muted">Dead letters by when they went there (${stats.buckets.reduce((n, b) => n + b.dead_letters, 0)} in the ${rangeWords}), not by due time:
        a run that failed its last attempt, a poison message, a run the sweeper gave up on.</figcaption>
    </figure></section>`;
}

// The run queues' depth over the range (GET /stats/queues): what the sweeper sampled, the highest
// sample per bucket. The queues are shared by every tenant, so only administrators are answered; a
// tenant sees its own runs in flight in the "Now" table instead.
function loadDepth(range) {
  const now = Date.now();
  return get("/stats/queues" + query({ from: new Date(now - range.span).toISOString(), to: new Date(now).toISOString(), bucket: range.bucket }));
}

const FIGURE_WORDS = { visible: "ready", in_flight: "in flight", delayed: "delayed" };

function QueueDepth({ range, rangeKey }) {
  const refused = useRef(false); // a 403 is not asked again while the page is open
  const load = () => (refused.current ? Promise.resolve({ refused: true })
    : loadDepth(range).catch((e) => { if (e.status !== 403) throw e; refused.current = true; return { refused: true }; }));
  const { data: depth, error } = usePoll(load, [rangeKey], range.every);
  const words = range.label.toLowerCase();
  let body;
  if (depth?.refused) {
    body = html`<p class="muted">The queues are shared by every tenant: their depth is shown to administrators.
      Your own runs in flight are in the table under “Now”.</p>`;
  } else if (!depth) {
    body = html`<${ErrorBox} error=${error} />${!error && html`<p>Loading…</p>`}`;
  } else {
    const xs = depth.buckets.map((b) => new Date(b.start).getTime() / 1000);
    const sampled = depth.buckets.filter((b) => b.samples).length;
    body = html`<${ErrorBox} error=${error} />
      <figure>
        <${Chart} label=${`Messages ready per run queue per ${depth.bucket} over the ${words}, the highest sample of each; the numbers are in the table below`}
          series=${depth.queues} xs=${xs} ys=${depth.queues.map((q) => depth.buckets.map((b) => b.queues[q].visible))} unit="messages ready" />
        <figcaption class="muted">Messages ready to be received (the backlog) per queue: the highest of the samples the
          sweeper took in each ${depth.bucket} (one per sweep; ${sampled} of ${depth.buckets.length} ${depth.bucket}s sampled). In flight and delayed are in the table.</figcaption>
      </figure>
      <details><summary>The numbers, one row per ${depth.bucket}</summary>
        <div class="scroll" tabindex="0" role="region" aria-label=${"Queue depth per " + depth.bucket + ", table"}><table id="depth-table">
          <caption class="sr-only">Queue depth per ${depth.bucket}: ready, in flight and delayed messages per queue, the highest sample</caption>
          <thead><tr><td></td>${depth.queues.map((q) => html`<th scope="colgroup" colspan="3">${q}</th>`)}</tr>
            <tr><th scope="col">${depth.bucket} from</th>${depth.queues.map((q) => Object.keys(FIGURE_WORDS).map((f) => html`<th scope="col" class="num" aria-label=${q + " " + FIGURE_WORDS[f]}>${FIGURE_WORDS[f]}</th>`))}</tr></thead>
          <tbody>${depth.buckets.map((b) => html`<tr><th scope="row"><time datetime=${b.start}>${bucketLabel(b.start, depth.bucket)}</time></th>
            ${depth.queues.map((q) => Object.keys(FIGURE_WORDS).map((f) => html`<td class="num">${b.queues[q][f] ?? "—"}</td>`))}</tr>`)}</tbody>
        </table></div></details>`;
  }
  return html`<section aria-labelledby="depth-h"><h2 id="depth-h">Queue depth over time</h2>${body}</section>`;
}
