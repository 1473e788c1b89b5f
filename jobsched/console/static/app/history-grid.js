// A job's history as a grid (issue 33 §2, decision 0063), from GET /jobs/{id}/history: one cell per
// run record, oldest first, coloured by what happened and marked with a character (the same as
// `jobsched jobs history`), a bar where the zone's UTC offset changed, then the upcoming fires. A cell
// opens its run. The grid is one Tab stop: the arrow keys, Home and End move between its cells, Enter
// opens one. The same data is in a table under it; a paused job shows what a resume would do under
// each misfire policy.
import { useRef, useState } from "preact/hooks";
import { get, query } from "./api.js";
import { MISFIRE, NOTES, offsetText } from "./format.js";
import { ErrorBox, html, link, ShortId, usePoll, When } from "./ui.js";

export const STATE_MARKS = { succeeded: "+", failed: "X", cancelled: "c", running: "R", queued: "q", retrying: "r" };
export const SKIP_MARKS = { misfire: "m", overlap: "o", dst_gap: "g", paused: "p", rescheduled: "s", replaced: "x", deleted: "d", budget: "b" };
const SKIP_WORDS = {
  misfire: "missed by more than the misfire grace (outage, pause, backlog)",
  overlap: "the previous run was still active (overlap policy)",
  dst_gap: "its local time did not exist (DST gap, dst_gap: skip)",
  paused: "withdrawn by a pause",
  rescheduled: "withdrawn: the schedule was changed",
  replaced: "replaced by a later occurrence (overlap policy replace)",
  deleted: "withdrawn: the job was deleted",
  budget: "not run: the tenant was over its monthly budget",
};
const PAGE = 100;

// "Sun 25 Oct 2026, 02:59:41 GMT+1" on the job's wall clock (a grid spans years: the year is in).
export function fullLocal(iso, timezone) {
  if (!iso) return "—";
  return new Date(iso).toLocaleString("en-GB", { timeZone: timezone || "UTC", weekday: "short", year: "numeric",
    month: "short", day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short" });
}

function At({ iso, timezone }) {
  return html`<time datetime=${iso} title=${iso}>${fullLocal(iso, timezone)}</time>`;
}

export function markOf(cell) {
  if (cell.state !== "skipped") return STATE_MARKS[cell.state] || "?";
  const letter = SKIP_MARKS[cell.skip_reason] || "-";
  return cell.skipped_count ? letter.toUpperCase() : letter;
}

// "skipped: misfire (312 occurrences, to 4 Mar 09:00)" / "failed: boom" / "succeeded".
export function outcomeText(cell, timezone) {
  if (cell.state !== "skipped") return cell.error ? `${cell.state}: ${cell.error}` : cell.state;
  const reason = cell.skip_reason || "no reason recorded";
  const many = cell.skipped_count ? ` (${cell.skipped_count} occurrences, to ${fullLocal(cell.skipped_until, timezone)})` : "";
  return `skipped: ${reason}${many}`;
}

// The cells, offset changes and upcoming fires in time order: [{kind: "cell"|"change"|"upcoming", ...}].
function items(page) {
  const entries = [
    ...page.cells.map((c) => ({ kind: "cell", at: c.scheduled_at, cell: c })),
    ...page.upcoming.map((f) => ({ kind: "upcoming", at: f.at, fire: f })),
  ];
  const out = [];
  const changes = [...page.dst_changes];
  for (const entry of entries) {
    while (changes.length && changes[0].at <= entry.at) {
      const change = changes.shift();
      if (out.length) out.push({ kind: "change", at: change.at, change });
    }
    out.push(entry);
  }
  return out;
}

function Cells({ page, timezone }) {
  const list = useRef(null);
  const [active, setActive] = useState(0);
  const entries = items(page);
  const focusable = entries.filter((e) => e.kind !== "change").length;
  const current = Math.min(active, Math.max(0, focusable - 1));
  const move = (event) => {
    const keys = { ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1 };
    let next = null;
    if (event.key in keys) next = current + keys[event.key];
    if (event.key === "Home") next = 0;
    if (event.key === "End") next = focusable - 1;
    if (next === null) return;
    event.preventDefault();
    next = Math.max(0, Math.min(focusable - 1, next));
    setActive(next);
    list.current?.querySelectorAll("[data-cell]")[next]?.focus();
  };
  let index = -1;
  return html`<ol class="history-grid" ref=${list} onKeyDown=${move}
      aria-label=${`History of the job, oldest first: ${page.cells.length} records, then ${page.upcoming.length} upcoming fires. Arrow keys move, Enter opens a run.`}>
    ${entries.map((entry) => {
      if (entry.kind === "change") {
        const { before_seconds: before, after_seconds: after } = entry.change;
        const words = `UTC offset change at ${fullLocal(entry.at, timezone)}: ${offsetText(before / 60)} to ${offsetText(after / 60)}`;
        return html`<li key=${"change-" + entry.at} class="grid-change" title=${words}><span class="sr-only">${words}</span></li>`;
      }
      index += 1;
      const mine = index;
      const tab = mine === current ? 0 : -1;
      const focus = () => setActive(mine);
      if (entry.kind === "upcoming") {
        const f = entry.fire;
        const words = `${fullLocal(f.at, timezone)}: upcoming${f.note ? ` (${f.note}: ${NOTES[f.note] || ""})` : ""}`;
        return html`<li key=${"up-" + f.at}><span class="grid-cell grid-upcoming" data-cell tabindex=${tab} onFocus=${focus}
          role="img" aria-label=${words} title=${words}>${f.note ? "!" : "·"}</span></li>`;
      }
      const c = entry.cell;
      const words = `${fullLocal(c.scheduled_at, timezone)}: ${outcomeText(c, timezone)}${c.trigger !== "schedule" ? ` (${c.trigger})` : ""}`;
      const kind = c.state === "skipped" ? "grid-skipped" : "state-bg-" + c.state;
      return html`<li key=${c.run_id}><a href=${link("runs", c.run_id)} class=${`grid-cell ${kind}${c.skipped_count ? " grid-summary" : ""}${c.trigger !== "schedule" && c.trigger !== "catchup" ? " grid-manual" : ""}`}
        data-cell tabindex=${tab} onFocus=${focus} aria-label=${words} title=${words}>${markOf(c)}</a></li>`;
    })}
  </ol>`;
}

function Legend() {
  const state = Object.entries(STATE_MARKS).map(([s, m]) => html`<li><span class=${"grid-cell state-bg-" + s} aria-hidden="true">${m}</span> ${s}</li>`);
  const skip = Object.entries(SKIP_MARKS).map(([r, m]) => html`<li><span class="grid-cell grid-skipped" aria-hidden="true">${m}</span> skipped: ${r}</li>`);
  return html`<ul class="grid-legend" aria-label="Legend">${state}${skip}
    <li><span class="grid-cell grid-skipped grid-summary" aria-hidden="true">M</span> many occurrences in one record</li>
    <li><span class="grid-cell state-bg-succeeded grid-manual" aria-hidden="true">+</span> a manual or backfill run (underlined)</li>
    <li><span class="grid-cell grid-upcoming" aria-hidden="true">·</span> upcoming (<strong>!</strong> moved or doubled by DST)</li>
    <li><span class="grid-change grid-change-key" aria-hidden="true"></span> UTC offset change</li></ul>`;
}

function CellTable({ page, timezone }) {
  return html`<details><summary>The history as a table</summary>
    <div class="scroll" tabindex="0" role="region" aria-label="History, table"><table id="history-table">
      <caption class="sr-only">The job's records, oldest first, then its upcoming fires</caption>
      <thead><tr><th scope="col">Scheduled (${timezone})</th><th scope="col">UTC offset</th><th scope="col">What happened</th>
        <th scope="col">Trigger</th><th scope="col">Run</th></tr></thead>
      <tbody>${items(page).map((e) => e.kind === "change"
        ? html`<tr class="change-row"><td colspan="5">UTC offset changes at <${At} iso=${e.at} timezone=${timezone} />: ${offsetText(e.change.before_seconds / 60)} → ${offsetText(e.change.after_seconds / 60)}</td></tr>`
        : e.kind === "upcoming"
          ? html`<tr><td><${At} iso=${e.at} timezone=${timezone} /></td><td>${e.fire.local.slice(19) || "—"}</td>
              <td>upcoming${e.fire.note ? html` — <strong>${e.fire.note}</strong>: ${NOTES[e.fire.note] || ""}` : ""}</td><td>schedule</td><td class="muted">—</td></tr>`
          : html`<tr><td><${At} iso=${e.at} timezone=${timezone} /></td><td>${offsetText(e.cell.utc_offset_seconds / 60)}</td>
              <td>${outcomeText(e.cell, timezone)}${e.cell.state === "skipped" && SKIP_WORDS[e.cell.skip_reason] ? html` <span class="muted">(${SKIP_WORDS[e.cell.skip_reason]})</span>` : ""}</td>
              <td>${e.cell.trigger}</td><td><${ShortId} id=${e.cell.run_id} href=${link("runs", e.cell.run_id)} /></td></tr>`)}</tbody>
    </table></div></details>`;
}

function ResumePreview({ page, timezone }) {
  if (!page.resume_preview) return null;
  const skipped = (p) => (p.skipped_count ? Object.entries(p.skipped).map(([r, n]) => `${n} ${r}`).join(", ") : "none");
  return html`<h3 id="resume-h">If resumed now</h3>
    <p>The job is paused. Resuming it (<strong>Resume</strong> above) decides the occurrences it missed by the
      misfire policy — the job's own, or the one chosen for this resume. What each would do now, planned by the dispatcher's own rules:</p>
    <table aria-labelledby="resume-h" id="resume-table">
      <thead><tr><th scope="col">Misfire policy</th><th scope="col" class="num">Runs queued</th><th scope="col">Runs (oldest first)</th>
        <th scope="col">Recorded skipped</th><th scope="col">Then next</th></tr></thead>
      <tbody>${page.resume_preview.map((p) => html`<tr>
        <th scope="row"><code>${p.policy}</code>${p.job_default ? " (the job's)" : ""}<div class="muted">${MISFIRE[p.policy]}</div></th>
        <td class="num">${p.runs_count}</td>
        <td>${p.runs.length ? p.runs.map((r) => html`<div><${When} iso=${r.at} timezone=${timezone} /> <span class="muted">${r.trigger}</span></div>`) : html`<span class="muted">none</span>`}
          ${p.runs_count > p.runs.length ? html`<div class="muted">and ${p.runs_count - p.runs.length} more</div>` : ""}</td>
        <td>${skipped(p)}${p.skipped_first ? html`<div class="muted">from <${When} iso=${p.skipped_first} timezone=${timezone} /> to <${When} iso=${p.skipped_last} timezone=${timezone} /></div>` : ""}
          ${!p.complete ? html`<div class="note">The first ${p.decided} missed occurrences; the dispatcher decides the later ones the same way.</div>` : ""}</td>
        <td><${When} iso=${p.next_at} timezone=${timezone} /></td></tr>`)}</tbody>
    </table>`;
}

export function HistoryGrid({ job }) {
  const [cursors, setCursors] = useState([]); // the cursors of the pages behind the newest one
  const cursor = cursors[cursors.length - 1] || null;
  const { data: page, error } = usePoll(
    () => get(`/jobs/${encodeURIComponent(job.id)}/history${query({ limit: PAGE, cursor })}`),
    [job.id, cursor, job.version, job.state], cursor ? 60000 : undefined);
  const timezone = job.timezone;
  return html`<section aria-labelledby="history-h">
    <h2 id="history-h">History</h2>
    <p class="muted">One cell per record, oldest first (${timezone} wall clock on hover and in the table), then the next fires. Choose a cell for its run.</p>
    <${ErrorBox} error=${error} />
    ${!page ? !error && html`<p>Loading history…</p>` : html`
      ${!page.cells.length && !page.upcoming.length ? html`<p class="muted">Nothing yet: no records and no upcoming fires.</p>`
        : html`<${Cells} page=${page} timezone=${timezone} />`}
      <div class="actions pager">
        <button type="button" disabled=${!page.next_cursor} onClick=${() => setCursors([...cursors, page.next_cursor])}>Older</button>
        <button type="button" disabled=${!cursors.length} onClick=${() => setCursors(cursors.slice(0, -1))}>Newer</button>
        <button type="button" disabled=${!cursors.length} onClick=${() => setCursors([])}>Newest</button>
        <span class="muted" role="status">${cursors.length ? `${cursors.length} page${cursors.length > 1 ? "s" : ""} back` : "Newest records"}${page.cells.length ? html` · <${At} iso=${page.cells[0].scheduled_at} timezone=${timezone} /> to <${At} iso=${page.cells[page.cells.length - 1].scheduled_at} timezone=${timezone} />` : ""}</span>
      </div>
      <${Legend} />
      <${CellTable} page=${page} timezone=${timezone} />
      <${ResumePreview} page=${page} timezone=${timezone} />`}
  </section>`;
}
