// Next hour: the runs due per minute, per pool and priority, from GET /forecast (decision 0054) —
// a chart, and the same figures in a table (the chart is an image to screen readers; the table is
// the data).
import { useEffect, useRef } from "preact/hooks";
import { get } from "./api.js";
import { ErrorBox, html, usePoll } from "./ui.js";

const COLOURS = ["#0b5cad", "#1a6b32", "#7a4d00", "#6f42c1", "#a4161a", "#4a5360"];

export function lanesOf(forecast) {
  return (forecast.lanes || []).filter((lane) => lane.total > 0);
}

export function rowsOf(forecast) {
  const rows = [];
  for (const lane of lanesOf(forecast)) {
    forecast.minutes.forEach((minute, i) => {
      if (lane.counts[i]) rows.push({ minute, pool: lane.pool, priority: lane.priority, runs: lane.counts[i], burst: lane.bursts[i], needed: lane.needed[i] });
    });
  }
  return rows.sort((a, b) => (a.minute < b.minute ? -1 : a.minute > b.minute ? 1 : 0));
}

function hhmm(iso) {
  return new Date(iso).toISOString().slice(11, 16);
}

function ForecastChart({ forecast }) {
  const box = useRef(null);
  const plot = useRef(null);
  const lanes = lanesOf(forecast);
  const key = lanes.map((l) => `${l.pool}/${l.priority}`).join(",");
  useEffect(() => {
    if (!box.current || !globalThis.uPlot || !lanes.length) return;
    const xs = forecast.minutes.map((m) => new Date(m).getTime() / 1000);
    const data = [xs, ...lanes.map((lane) => lane.counts)];
    plot.current?.destroy();
    const width = Math.max(320, Math.min(1100, box.current.clientWidth || 800));
    plot.current = new uPlot({
      width, height: 200, scales: { x: { time: true } },
      axes: [{ stroke: "#1b1f24" }, { stroke: "#1b1f24", label: "runs due per minute" }],
      series: [{}, ...lanes.map((lane, i) => ({ label: `${lane.pool} ${lane.priority}`, stroke: COLOURS[i % COLOURS.length], width: 2, points: { show: true, size: 4 } }))],
    }, data, box.current);
  }, [forecast.start, key, forecast.total]);
  useEffect(() => () => { plot.current?.destroy(); plot.current = null; }, []);
  return html`<figure>
    <div ref=${box} class="chart" role="img" aria-label="Runs due per minute over the next hour, one line per pool and priority; the same counts are in the table below"></div>
    <figcaption class="muted">Runs due per minute, next 60 minutes (UTC), by pool and priority.</figcaption>
  </figure>`;
}

export function NextHour() {
  const { data, error } = usePoll(() => get("/forecast"), [], 60_000); // the forecast moves by the minute
  if (!data) return html`<section aria-labelledby="next-h"><h2 id="next-h">Next hour</h2><${ErrorBox} error=${error} /></section>`;
  const rows = rowsOf(data);
  return html`<section aria-labelledby="next-h"><h2 id="next-h">Next hour</h2>
    <${ErrorBox} error=${error} />
    <p>${data.total} runs due in the next 60 minutes.</p>
    ${rows.length > 0 && html`<${ForecastChart} forecast=${data} />`}
    ${rows.length > 0 && html`<table>
      <caption class="sr-only">Runs due in the next hour, by minute, pool and priority</caption>
      <thead><tr><th scope="col">minute (UTC)</th><th scope="col">pool</th><th scope="col">priority</th><th scope="col">runs</th><th scope="col">most in one second</th><th scope="col">concurrency needed</th></tr></thead>
      <tbody>${rows.slice(0, 60).map((r) => html`<tr><td>${hhmm(r.minute)}</td><td>${r.pool}</td><td>${r.priority}</td><td>${r.runs}</td><td>${r.burst}</td><td>${r.needed}</td></tr>`)}</tbody>
    </table>`}
    ${rows.length > 60 && html`<p class="muted">The first 60 rows; jobsched forecast lists them all.</p>`}
  </section>`;
}
