// Small shared pieces: the htm binding, polling, dialogs, badges, error boxes.
import { h } from "preact";
import { useCallback, useEffect, useMemo, useRef, useState } from "preact/hooks";
import htm from "htm";
import { isoLocal, utc } from "./format.js";

export const html = htm.bind(h);

//: How often a page refreshes its data (no full reload; paused while the tab is hidden).
export const POLL_MS = 2000;

// Load now and every POLL_MS: {data, error, loading, reload}. A newer answer always wins.
export function usePoll(load, deps, ms = POLL_MS) {
  const [state, setState] = useState({ data: null, error: null, loading: true });
  const generation = useRef(0);
  const reload = useCallback(async () => {
    const mine = ++generation.current;
    try {
      const data = await load();
      if (mine === generation.current) setState({ data, error: null, loading: false });
    } catch (error) {
      if (mine === generation.current) setState((s) => ({ data: s.data, error, loading: false }));
    }
  }, deps);
  useEffect(() => {
    setState({ data: null, error: null, loading: true });
    reload();
    const timer = setInterval(() => { if (!document.hidden) reload(); }, ms);
    return () => { clearInterval(timer); generation.current++; };
  }, [reload]);
  return { ...state, reload };
}

export function Badge({ state }) {
  return html`<span class=${"badge state-" + state}>${state}</span>`;
}

export function When({ iso, timezone }) {
  if (!iso) return html`<span class="muted">—</span>`;
  return html`<time datetime=${iso} title=${utc(iso)}>${isoLocal(iso, timezone)}</time>`;
}

export function ErrorBox({ error }) {
  if (!error) return null;
  return html`<p class="error" role="alert">${error.status ? `${error.status} ${error.code}: ` : ""}${error.message}</p>`;
}

// A modal <dialog>: focus is trapped by the browser, Escape closes it, focus returns to the opener.
export function Dialog({ open, title, onClose, children }) {
  const ref = useRef(null);
  const opener = useRef(null);
  useEffect(() => {
    const dialog = ref.current;
    if (!dialog) return;
    if (open && !dialog.open) { opener.current = document.activeElement; dialog.showModal(); }
    if (!open && dialog.open) dialog.close();
    if (!open && opener.current) { opener.current.focus?.(); opener.current = null; }
  }, [open]);
  const id = "dialog-" + title.replace(/\W+/g, "-").toLowerCase();
  return html`<dialog ref=${ref} aria-labelledby=${id} onClose=${() => open && onClose()}>
    ${open && html`<h2 id=${id}>${title}</h2>${children}`}
  </dialog>`;
}

// A button that runs an async action, shows it is busy and reports the error next to it.
export function useAction() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const run = async (action) => {
    setBusy(true); setError(null);
    try { return await action(); } catch (e) { setError(e); return undefined; } finally { setBusy(false); }
  };
  return { busy, error, run, setError };
}

export function Json({ value, label }) {
  return html`<pre tabindex="0" aria-label=${label}>${JSON.stringify(value, null, 2)}</pre>`;
}

export function parseJsonObject(text, what = "the payload") {
  let value;
  try { value = JSON.parse(text); } catch (e) { throw new Error(`${what} is not valid JSON: ${e.message}`); }
  if (value === null || typeof value !== "object" || Array.isArray(value)) throw new Error(`${what} must be a JSON object`);
  return value;
}

// The hash route: "#/runs/abc?state=failed" -> {path: ["runs", "abc"], params: URLSearchParams}.
export function useRoute() {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const changed = () => setHash(location.hash); // the same string again renders nothing
    addEventListener("hashchange", changed);
    // The address may have changed between the first render and this effect (Preact runs effects after
    // the next frame): that hashchange fired before the listener, so read the address again now.
    changed();
    return () => removeEventListener("hashchange", changed);
  }, []);
  return useMemo(() => {
    const [path, search] = (hash.replace(/^#\/?/, "") || "overview").split("?");
    return { path: path.split("/").filter(Boolean).map(decodeURIComponent), params: new URLSearchParams(search || "") };
  }, [hash]);
}

export const link = (...parts) => "#/" + parts.map(encodeURIComponent).join("/");

export function setParams(base, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v) q.set(k, v);
  const text = q.toString();
  location.replace("#/" + base + (text ? "?" + text : ""));
}

// A long id shown short in a table column: its start, "…", its end; the middle stays in the page but
// out of sight, so the link's name, a screen reader and a text selection have the whole id. The whole
// id is also on hover (title) and on the copy button.
export function splitId(id, head = 10, tail = 18) {
  if (!id || id.length <= head + tail + 4) return [id || "", "", ""];
  return [id.slice(0, head), id.slice(head, id.length - tail), id.slice(id.length - tail)];
}

export function ShortId({ id, href }) {
  const [copied, setCopied] = useState(false);
  const [start, middle, end] = splitId(id);
  const text = html`<code title=${id}>${start}${middle && html`<span class="elided">${middle}</span><span aria-hidden="true">…</span>`}${end}</code>`;
  const copy = async () => {
    try { await navigator.clipboard.writeText(id); setCopied(true); setTimeout(() => setCopied(false), 2000); } catch { setCopied(false); }
  };
  return html`<span class="short-id">${href ? html`<a href=${href}>${text}</a>` : text}
    <button type="button" class="copy" onClick=${copy} aria-label=${"Copy " + id} title="Copy the whole id">${copied ? "Copied" : "Copy"}</button></span>`;
}

// Re-check a JSON text as it is edited, once an earlier submit found it wrong: the error shown is
// always the current text's (none once it is a valid object), never a stale one.
export function recheckJson(action, text, what) {
  if (!action.error || action.error.status) return; // only the form's own check, not an API answer
  try { parseJsonObject(text, what); action.setError(null); } catch (e) { action.setError(e); }
}
