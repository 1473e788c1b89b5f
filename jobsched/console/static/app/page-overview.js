// Overview: the last hour of this tenant's runs, its backlog, schedule lag, dead letters and the
// limits in use — all computed from GET /runs, GET /dead-letters and the calls of limits.js.
import { useEffect, useRef } from "preact/hooks";
import { listAll } from "./api.js";
import { seconds } from "./format.js";
import { ErrorBox, html, usePoll } from "./ui.js";
import { LimitsInUse, loadLimits } from "./limits.js";
import { NextHour } from "./forecast.js";

export const STATES = ["queued", "running", "retrying", "succeeded", "failed", "cancelled", "skipped"];
const COLOURS = { queued: "#0b5cad", running: "#6f42c1", retrying: "#7a4d00", succeeded: "#1a6b32",
  failed: "#a4161a", cancelled: "#4a5360", skipped: "#8a6d3b" };
const MINUTE = 60 * 1000;

function percentile(sorted, p) {
  if (!sorted.length) return null;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

export function summarise(runs, now) {
  const hourAgo = now - 60 * MINUTE;
  const counts = Object.fromEntries(STATES.map((s) => [s, 0]));
  const buckets = Array.from({ length: 60 }, () => Object.fromEntries(STATES.map((s) => [s, 0])));
  const lags = [];
  let queuedDue = 0, queuedAhead = 0;
  for (const run of runs) {
    const at = new Date(run.scheduled_at).getTime();
    if (run.state === "queued") (at > now ? queuedAhead++ : queuedDue++);
    if (at > now || at < hourAgo) continue;
    counts[run.state]++;
    buckets[Math.min(59, Math.floor((at - hourAgo) / MINUTE))][run.state]++;
    if (run.started_at && run.trigger !== "manual" && run.trigger !== "replay") {
      lags.push((new Date(run.started_at).getTime() - at) / 1000);
    }
  }
  lags.sort((a, b) => a - b);
  return { counts, buckets, lags, queuedDue, queuedAhead, hourAgo };
}

function RunsChart({ summary }) {
  const box = useRef(null);
  const plot = useRef(null);
  useEffect(() => {
    if (!box.current || !globalThis.uPlot) return;
    const xs = summary.buckets.map((_, i) => (summary.hourAgo + i * MINUTE) / 1000);
    const data = [xs, ...STATES.map((s) => summary.buckets.map((b) => b[s]))];
    if (!plot.current) {
      const width = Math.max(320, Math.min(1100, box.current.clientWidth || 800));
      plot.current = new uPlot({
        width, height: 240, scales: { x: { time: true } },
        axes: [{ stroke: "#1b1f24" }, { stroke: "#1b1f24", label: "runs per minute" }],
        series: [{}, ...STATES.map((s) => ({ label: s, stroke: COLOURS[s], width: 2, points: { show: true, size: 4 } }))],
      }, data, box.current);
    } else {
      plot.current.setData(data);
    }
  }, [summary]);
  useEffect(() => () => { plot.current?.destroy(); plot.current = null; }, []);
  return html`<figure>
    <div ref=${box} class="chart" role="img" aria-label="Runs per minute over the last hour, one line per state; the same counts are in the table below"></div>
    <figcaption class="muted">Runs per minute by scheduled time, last 60 minutes.</figcaption>
  </figure>`;
}

export function Overview() {
  const { data, error } = usePoll(async () => {
    const now = Date.now();
    const since = new Date(now - 60 * MINUTE).toISOString();
    const [runs, dead, limits] = await Promise.all([
      listAll("/runs", { since }, 2000),
      listAll("/dead-letters", {}, 1000),
      loadLimits(now),
    ]);
    const deadLastHour = dead.items.filter((d) => d.failed_at && new Date(d.failed_at).getTime() >= now - 60 * MINUTE).length;
    limits.startedLastMinute = runs.items.filter((r) => r.started_at && new Date(r.started_at).getTime() >= now - MINUTE).length;
    return { now, runs, dead, deadLastHour, limits, summary: summarise(runs.items, now) };
  }, []);
  if (!data) return html`<h1>Overview</h1><${ErrorBox} error=${error} />${!error && html`<p>Loading…</p>`}`;
  const { summary, dead, deadLastHour, runs } = data;
  const lagP50 = percentile(summary.lags, 50), lagP95 = percentile(summary.lags, 95);
  const lagMax = summary.lags.length ? summary.lags[summary.lags.length - 1] : null;
  const plus = (more) => (more ? "+" : "");
  return html`<h1>Overview</h1>
    <${ErrorBox} error=${error} />
    <section aria-labelledby="now-h"><h2 id="now-h">Now</h2>
      <div class="cards">
        <div class="card"><div class="figure">${summary.counts.running}</div><div class="label">running (concurrency in use)</div></div>
        <div class="card"><div class="figure">${summary.queuedDue}</div><div class="label">queued and due (your backlog)</div></div>
        <div class="card"><div class="figure">${summary.counts.retrying}</div><div class="label">waiting out a retry backoff</div></div>
        <div class="card"><div class="figure">${summary.queuedAhead}</div><div class="label">queued ahead of their due time</div></div>
        <div class="card"><div class="figure"><a href="#/dead-letters">${dead.items.length}${plus(dead.more)}</a></div><div class="label">dead letters (${deadLastHour} in the last hour)</div></div>
        <div class="card"><div class="figure">${lagP50 === null ? "—" : seconds(lagP50)}</div>
          <div class="label">schedule lag p50${lagP95 === null ? "" : `, p95 ${seconds(lagP95)}, max ${seconds(lagMax)}`} (${summary.lags.length} scheduled runs started)</div></div>
      </div>
    </section>
    <${LimitsInUse} limits=${data.limits} />
    <section aria-labelledby="hour-h"><h2 id="hour-h">Last hour</h2>
      <${RunsChart} summary=${summary} />
      <table><caption class="sr-only">Runs scheduled in the last hour, by state</caption>
        <thead><tr>${Object.keys(summary.counts).map((s) => html`<th scope="col">${s}</th>`)}</tr></thead>
        <tbody><tr>${Object.entries(summary.counts).map(([s, n]) => html`<td><a href=${"#/runs?state=" + s}>${n}</a></td>`)}</tr></tbody>
      </table>
      ${runs.more && html`<p class="muted">Only the newest 2000 runs of the hour are counted.</p>`}
    </section>
    <${NextHour} />`;
}
