// Words for what the API returns: instants, schedules, policies; and the next DST change of a zone.

const MACROS = {
  "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
  "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
};

const describe = (expression, options = {}) =>
  globalThis.cronstrue.toString(expression, { use24HourTimeFormat: true, verbose: false, ...options });

// "Every 5 minutes", "At 09:00, Monday through Friday", "Once, at 2026-12-01 09:00 (Europe/Paris)".
export function scheduleInWords(schedule, timezone) {
  const text = (schedule || "").trim();
  const lowered = text.toLowerCase();
  const zone = timezone && timezone !== "UTC" ? ` (${timezone})` : " (UTC)";
  try {
    if (lowered.startsWith("rate(")) {
      const [count, unit] = text.slice(5, -1).trim().split(/\s+/);
      return (count === "1" ? `Every ${unit.replace(/s$/, "")}` : `Every ${count} ${unit}`) + " of elapsed time";
    }
    if (lowered.startsWith("at(")) return `Once, at ${text.slice(3, -1).replace("T", " ")}${zone}`;
    if (lowered.startsWith("cron(")) {
      // EventBridge: minutes hours day-of-month month day-of-week year; days of week 1-7 = SUN-SAT.
      return describe("0 " + text.slice(5, -1).trim(), { dayOfWeekStartIndexZero: false }) + zone;
    }
    if (text.startsWith("@")) return describe(MACROS[lowered]) + zone;
    return describe(text) + zone;
  } catch {
    return "(no description for this expression)";
  }
}

export function isoLocal(iso, timezone) {
  if (!iso) return "—";
  const when = new Date(iso);
  return when.toLocaleString("en-GB", { timeZone: timezone || "UTC", month: "short", day: "2-digit",
    hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short" });
}

export const utc = (iso) => (iso ? iso.replace("T", " ").replace(/\.\d+Z$/, "Z").replace(/Z$/, " UTC") : "—");

export function ago(iso, now = Date.now()) {
  if (!iso) return "";
  const seconds = Math.round((now - new Date(iso).getTime()) / 1000);
  const span = Math.abs(seconds);
  const words = span < 60 ? `${span} s` : span < 3600 ? `${Math.round(span / 60)} min` : span < 86400 * 2
    ? `${Math.round(span / 3600)} h` : `${Math.round(span / 86400)} days`;
  return seconds >= 0 ? `${words} ago` : `in ${words}`;
}

export const seconds = (value) => (value < 1 ? `${Math.round(value * 1000)} ms` : `${value.toFixed(1)} s`);

export function handlerOf(job) {
  if (job.target?.handler) return job.target.handler;
  if (job.target?.http) return `${job.target.http.method || "POST"} ${job.target.http.url}`;
  if (job.target?.workflow) return `workflow of ${job.target.workflow.nodes?.length ?? "?"} nodes`;
  return "—";
}

export const MISFIRE = {
  run_once: "run the latest missed occurrence now, record the others skipped",
  run_all: "run every missed occurrence, oldest first (at most max_catchup)",
  skip: "run none of the missed occurrences, record them skipped",
};

export function policiesInWords(job) {
  const retry = job.retry || {};
  return [
    ["Misfire", `${MISFIRE[job.misfire_policy] || job.misfire_policy} — when an occurrence is missed by more than ${job.misfire_grace_seconds} s (outage, pause, backlog); up to ${job.max_catchup} caught up`],
    ["Overlap", {
      allow: "enqueue each occurrence even while the previous run is still queued, retrying or running (runs may overlap)",
      skip: "while the previous run is still queued, retrying or running, record the occurrence skipped (reason overlap)",
      buffer_one: "hold one occurrence until the previous run ends, then enqueue it; record further ones skipped (reason overlap)",
      replace: "cancel the previous run (reason replaced) and enqueue the new occurrence",
    }[job.overlap_policy] || job.overlap_policy],
    ["DST gap", job.dst_gap === "skip" ? "a local time that does not exist (spring forward) is skipped, recorded as dst_gap"
      : "a local time that does not exist (spring forward) fires once, at the first instant after the gap"],
    ["DST overlap", job.dst_overlap === "both" ? "a local time that happens twice (fall back) fires at each"
      : "a local time that happens twice (fall back) fires once, at its first occurrence"],
    ["Retries", `at most ${retry.max_attempts} attempts, backoff random(0, min(${retry.max_seconds} s, ${retry.base_seconds} s × 2ⁿ))`],
    ["Timeout", `${job.timeout_seconds} s per attempt`],
    ["Jitter", job.jitter_seconds ? `each run starts up to ${job.jitter_seconds} s after its due time` : "none"],
    ["Deadline", job.deadline_seconds ? `a scheduled run not succeeded ${job.deadline_seconds} s after its instant is reported to the owners`
      : "none"],
  ];
}

// The UTC offset (minutes) of `zone` at instant `ms`.
function offsetMinutes(zone, ms) {
  const parts = new Intl.DateTimeFormat("en-US", { timeZone: zone, hourCycle: "h23", year: "numeric", month: "2-digit",
    day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit" }).formatToParts(new Date(ms));
  const v = Object.fromEntries(parts.map((p) => [p.type, p.value]));
  const asUtc = Date.UTC(+v.year, +v.month - 1, +v.day, +v.hour, +v.minute, +v.second);
  return Math.round((asUtc - Math.floor(ms / 1000) * 1000) / 60000);
}

// The next instant after `fromMs` (within 400 days) where `zone`'s offset changes: {at, before, after} or null.
export function nextOffsetChange(zone, fromMs) {
  const hour = 3600 * 1000;
  const start = offsetMinutes(zone, fromMs);
  let step = 24 * hour;
  for (let t = fromMs + step; t < fromMs + 400 * 24 * hour; t += step) {
    if (offsetMinutes(zone, t) !== start) {
      let lo = t - step, hi = t; // the change is in (lo, hi]: bisect to the second
      while (hi - lo > 1000) {
        const mid = lo + Math.floor((hi - lo) / 2);
        if (offsetMinutes(zone, mid) === start) lo = mid; else hi = mid;
      }
      const second = Math.floor(hi / 1000) * 1000; // offsets change on whole seconds
      const at = offsetMinutes(zone, second) !== start ? second : second + 1000;
      return { at: new Date(at).toISOString().replace(".000Z", "Z"), before: start, after: offsetMinutes(zone, at) };
    }
  }
  return null;
}

export const offsetText = (minutes) =>
  `UTC${minutes < 0 ? "−" : "+"}${String(Math.floor(Math.abs(minutes) / 60)).padStart(2, "0")}:${String(Math.abs(minutes) % 60).padStart(2, "0")}`;

export const NOTES = {
  dst_gap_shifted: "this local time does not exist (spring forward): fired at the first instant after the gap",
  dst_overlap_first: "this local time happens twice (fall back): the first occurrence",
  dst_overlap_second: "this local time happens twice (fall back): the second occurrence",
};

export function pretty(value) {
  return value === undefined || value === null ? "null" : JSON.stringify(value, null, 2);
}
