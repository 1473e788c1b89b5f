// "Budget" on the Overview: the tenant's monthly budget, its spend this UTC month, the share used and
// the state (GET /budget; docs/semantics/limits.md "Spend caps"). The share is a <meter> with its
// number beside it, so a screen reader reads the figure, not a colour.
import { get } from "./api.js";
import { ErrorBox, html, usePoll } from "./ui.js";

const BUDGET_EVERY = 60000;
//: What each state means for the tenant's runs.
export const STATE_WORDS = {
  none: "No budget is set: runs are not capped.",
  ok: "Under 80 % of the budget.",
  warning: "80 % or more of the budget: the tenant's notification recipients were told.",
  capped: "The budget is used up: new runs are recorded skipped (reason budget) until it is raised or the month ends.",
};

export function Budget() {
  const { data: budget, error } = usePoll(() => get("/budget"), [], BUDGET_EVERY);
  if (!budget) return html`<${ErrorBox} error=${error} />${!error && html`<p>Loading…</p>`}`;
  const usd = (v) => (v === null || v === undefined ? "none" : `${v.toFixed(6)} USD`);
  const used = budget.percent_used;
  return html`<${ErrorBox} error=${error} />
    <table id="budget-table"><caption class="sr-only">Monthly budget and spend</caption>
      <tbody>
        <tr><th scope="row">month (UTC)</th><td>${budget.month}</td></tr>
        <tr><th scope="row">monthly budget</th><td class="num">${usd(budget.monthly_usd)}</td></tr>
        <tr><th scope="row">spent this month</th><td class="num">${usd(budget.spent_usd)}</td></tr>
        <tr><th scope="row">used</th><td class="num">${used === null ? "-" : html`<meter min="0" max="100" low="80" high="99.99" optimum="0"
          value=${Math.min(used, 100)} aria-hidden="true"></meter> ${used} %`}</td></tr>
        <tr><th scope="row">state</th><td><strong class=${"budget-" + budget.state}>${budget.state}</strong></td></tr>
      </tbody>
    </table>
    <p class="muted">${STATE_WORDS[budget.state] || ""}</p>`;
}
