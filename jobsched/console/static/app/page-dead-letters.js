// Dead letters: filters; replay one with a corrected payload; replay or discard every match, after a
// confirmation that says how many.
import { useState } from "preact/hooks";
import { api, get, listAll, post, query } from "./api.js";
import { Dialog, ErrorBox, html, link, parseJsonObject, recheckJson, setParams, ShortId, useAction, usePoll, When } from "./ui.js";

const REASONS = ["permanent", "exhausted", "lease_expired", "poison", "stranded", "lost"];
const BULK_MAX = 1000;
const asInstant = (local) => (local ? new Date(local + "Z").toISOString() : "");

function describe(filters) {
  const parts = [];
  if (filters.job_id) parts.push(`job ${filters.job_id}`);
  if (filters.reason) parts.push(`reason ${filters.reason}`);
  if (filters.error_contains) parts.push(`error containing “${filters.error_contains}”`);
  if (filters.since) parts.push(`failed at or after ${filters.since} UTC`);
  if (filters.until) parts.push(`failed before ${filters.until} UTC`);
  return parts.length ? parts.join(", ") : "no filter: every dead letter";
}

export function DeadLetters({ params }) {
  const filters = Object.fromEntries(["job_id", "reason", "error_contains", "since", "until"].map((k) => [k, params.get(k) || ""]));
  const apiFilters = { ...filters, since: asInstant(filters.since), until: asInstant(filters.until) };
  const { data, error, reload } = usePoll(() => get("/dead-letters" + query({ ...apiFilters, limit: 100 })), Object.values(filters));
  const [replaying, setReplaying] = useState(null); // {letter, text}
  const [discarding, setDiscarding] = useState(null);
  const [bulk, setBulk] = useState(null); // {verb, count, more, ids}
  const [result, setResult] = useState(null);
  const action = useAction();
  const update = (key) => (e) => setParams("dead-letters", { ...filters, [key]: e.target.value });

  const replayOne = (e) => {
    e.preventDefault();
    action.run(async () => {
      const payload = parseJsonObject(replaying.text, "the corrected payload");
      const run = await post(`/dead-letters/${encodeURIComponent(replaying.letter.run_id)}/replay`, { payload });
      setReplaying(null); setResult({ text: "Replayed", run }); reload();
    });
  };
  const discardOne = () => action.run(async () => {
    await api("DELETE", `/dead-letters/${encodeURIComponent(discarding.run_id)}`);
    setDiscarding(null); setResult({ text: `Discarded ${discarding.run_id}` }); reload();
  });
  const prepareBulk = (verb) => action.run(async () => {
    const matching = await listAll("/dead-letters", apiFilters, BULK_MAX);
    setBulk({ verb, count: matching.items.length, more: matching.more, ids: matching.items.map((d) => d.run_id) });
  });
  const runBulk = () => action.run(async () => {
    if (bulk.verb === "replay") {
      const body = Object.fromEntries(Object.entries(apiFilters).filter(([, v]) => v));
      const answer = await post("/dead-letters/replay", { ...body, max_runs: Math.max(1, bulk.count) });
      setResult({ text: `Replayed ${answer.replayed}${answer.errors.length ? `; ${answer.errors.length} could not be replayed` : ""}${answer.more ? "; more matched" : ""}` });
    } else {
      let discarded = 0; const failed = [];
      for (const id of bulk.ids) {
        try { await api("DELETE", `/dead-letters/${encodeURIComponent(id)}`); discarded++; } catch (e) { failed.push(`${id}: ${e.message}`); }
      }
      setResult({ text: `Discarded ${discarded}${failed.length ? `; ${failed.length} failed: ${failed.join("; ")}` : ""}` });
    }
    setBulk(null); reload();
  });
  const count = data?.items.length || 0;
  return html`<h1>Dead letters</h1>
    <form class="filters" role="search" onSubmit=${(e) => e.preventDefault()}>
      <label>Job id<input value=${filters.job_id} onChange=${update("job_id")} /></label>
      <label>Reason<select value=${filters.reason} onChange=${update("reason")}><option value="">any</option>
        ${REASONS.map((r) => html`<option value=${r}>${r}</option>`)}</select></label>
      <label>Error contains<input value=${filters.error_contains} onChange=${update("error_contains")} /></label>
      <label>Failed since (UTC)<input type="datetime-local" step="1" value=${filters.since} onChange=${update("since")} /></label>
      <label>Failed before (UTC)<input type="datetime-local" step="1" value=${filters.until} onChange=${update("until")} /></label>
    </form>
    <div class="actions">
      <button type="button" onClick=${() => prepareBulk("replay")} disabled=${action.busy || !count}>Replay all matching…</button>
      <button type="button" class="danger" onClick=${() => prepareBulk("discard")} disabled=${action.busy || !count}>Discard all matching…</button>
    </div>
    ${result && html`<p role="status">${result.text}${result.run && html` — <a href=${link("runs", result.run.id)}>run ${result.run.id}</a> is ${result.run.state}`}.</p>`}
    ${!replaying && !discarding && !bulk && html`<${ErrorBox} error=${action.error} />`}
    <${ErrorBox} error=${error} />
    ${!data ? !error && html`<p>Loading…</p>` : html`
    <table><caption class="sr-only">Dead letters</caption>
      <thead><tr><th scope="col">Run</th><th scope="col">Job</th><th scope="col">Reason</th><th scope="col">Error</th>
        <th scope="col">Failed</th><th scope="col">Attempts</th><th scope="col">Notified</th><th scope="col">Actions</th></tr></thead>
      <tbody>${data.items.map((d) => html`<tr key=${d.run_id}>
        <td><${ShortId} id=${d.run_id} href=${link("runs", d.run_id)} /></td>
        <td><a href=${link("jobs", d.job_id)}><code>${d.job_id}</code></a></td>
        <td>${d.reason}</td><td>${d.error}</td><td><${When} iso=${d.failed_at} /></td><td>${d.attempts.length}</td>
        <td>${d.notification?.state || "—"}</td>
        <td><div class="actions">
          <button type="button" onClick=${() => { action.setError(null); setReplaying({ letter: d, text: JSON.stringify(d.payload, null, 2) }); }} aria-label=${"Replay " + d.run_id}>Replay…</button>
          <button type="button" class="danger" onClick=${() => { action.setError(null); setDiscarding(d); }} aria-label=${"Discard " + d.run_id}>Discard</button>
        </div></td>
      </tr>`)}</tbody>
    </table>
    ${data.items.length === 0 && html`<p class="muted">No dead letters match.</p>`}`}

    <${Dialog} open=${Boolean(replaying)} title="Replay a dead letter" onClose=${() => setReplaying(null)}>
      ${replaying && html`<form class="form" onSubmit=${replayOne}>
        <p>Run <code>${replaying.letter.run_id}</code> failed: ${replaying.letter.error}</p>
        <label>Payload for the replay (JSON object; edit it to correct the input)
          <textarea name="payload" value=${replaying.text} onInput=${(e) => { setReplaying({ ...replaying, text: e.target.value }); recheckJson(action, e.target.value, "the corrected payload"); }}></textarea></label>
        <${ErrorBox} error=${action.error} />
        <div class="actions"><button class="primary" disabled=${action.busy}>Replay</button>
          <button type="button" onClick=${() => setReplaying(null)}>Cancel</button></div>
      </form>`}
    <//>
    <${Dialog} open=${Boolean(discarding)} title="Discard a dead letter" onClose=${() => setDiscarding(null)}>
      ${discarding && html`<p>Discard <code>${discarding.run_id}</code>? It leaves the dead-letter list; the run stays <code>failed</code> in the history.</p>
        <${ErrorBox} error=${action.error} />
        <div class="actions"><button class="danger primary" onClick=${discardOne} disabled=${action.busy}>Discard</button>
          <button type="button" onClick=${() => setDiscarding(null)}>Cancel</button></div>`}
    <//>
    <${Dialog} open=${Boolean(bulk)} title=${bulk?.verb === "discard" ? "Discard all matching" : "Replay all matching"} onClose=${() => setBulk(null)}>
      ${bulk && html`<p><strong>${bulk.verb === "discard" ? "Discard" : "Replay"} ${bulk.count}${bulk.more ? " (the first " + BULK_MAX + ")" : ""} dead letter${bulk.count === 1 ? "" : "s"}</strong> matching ${describe(filters)}?</p>
        <p class="muted">${bulk.verb === "replay" ? "Each is queued again with its own payload (POST /dead-letters/replay with these filters)."
          : "Each is removed from the list (DELETE /dead-letters/{run_id}, one call per dead letter); the runs stay failed in the history."}</p>
        <${ErrorBox} error=${action.error} />
        <div class="actions"><button class=${"primary" + (bulk.verb === "discard" ? " danger" : "")} onClick=${runBulk} disabled=${action.busy || !bulk.count}>
          ${bulk.verb === "discard" ? "Discard" : "Replay"} ${bulk.count}</button>
          <button type="button" onClick=${() => setBulk(null)}>Cancel</button></div>`}
    <//>`;
}
