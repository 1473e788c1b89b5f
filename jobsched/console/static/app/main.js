// The console's shell: sign-in, the navigation, the hash router.
import { render } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { ApiError, cognitoSignIn, get, session, whenUnauthorized } from "./api.js";
import { ErrorBox, html, useRoute } from "./ui.js";
import { Overview } from "./page-overview.js";
import { Jobs } from "./page-jobs.js";
import { JobDetail } from "./page-job.js";
import { Runs } from "./page-runs.js";
import { RunDetail } from "./page-run.js";
import { DeadLetters } from "./page-dead-letters.js";
import { WorkflowDetail, Workflows } from "./page-workflows.js";
import { WorkflowRunDetail } from "./page-workflow-run.js";
import { Handlers } from "./page-handlers.js";

const PAGES = [
  ["overview", "Overview"],
  ["jobs", "Jobs"],
  ["runs", "Runs"],
  ["dead-letters", "Dead letters"],
  ["workflows", "Workflows"],
  ["handlers", "Handlers"],
];
//: Pages reached from another one's list: the navigation marks that one as current.
const SECTION_OF = { "workflow-runs": "workflows" };

function Login({ config, onSignedIn }) {
  const [token, setToken] = useState("");
  const [username, setUsername] = useState("");
  const [password, setPassword] = useState("");
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const check = async (bearer) => {
    await get("/jobs?limit=1", { token: bearer });
    session.signIn(bearer);
    onSignedIn();
  };
  const submit = (make) => async (event) => {
    event.preventDefault();
    setBusy(true); setError(null);
    try { await check(await make()); } catch (e) {
      setError(e.status === 401 ? new ApiError(401, "unauthorized", "the API refused this token: " + e.message) : e);
    } finally { setBusy(false); }
  };
  const cognito = config?.cognito;
  return html`<main id="main" class="login">
    <h1>Sign in to the jobsched console</h1>
    ${config?.auth_mode === "iam" && html`<p class="notice">This API authenticates with IAM (SigV4), which a browser
      cannot sign. Deploy the stack with the console's user pool (docs/deploy.md, "The console") to sign in here.</p>`}
    ${cognito && html`<form class="form" onSubmit=${submit(() => cognitoSignIn(cognito, username, password))}>
      <label>User name<input name="username" autocomplete="username" required value=${username} onInput=${(e) => setUsername(e.target.value)} /></label>
      <label>Password<input name="password" type="password" autocomplete="current-password" required value=${password} onInput=${(e) => setPassword(e.target.value)} /></label>
      <div><button class="primary" disabled=${busy}>Sign in</button></div>
    </form><h2>Or with a token</h2>`}
    <form class="form" onSubmit=${submit(() => token.trim())}>
      <label>Tenant token
        <input name="token" type="password" autocomplete="off" required value=${token} onInput=${(e) => setToken(e.target.value)}
          aria-describedby="token-help" />
      </label>
      <p id="token-help" class="muted">${config?.auth_mode === "jwt"
        ? "A JWT the API accepts (its tenant claim names your tenant)."
        : "The bearer token jobsched dev printed for your tenant."} It is kept in this tab only (sessionStorage).</p>
      <div><button class="primary" disabled=${busy}>Sign in</button></div>
    </form>
    <${ErrorBox} error=${error} />
  </main>`;
}

function Page({ route }) {
  const [first, second] = route.path;
  if (first === "jobs" && second) return html`<${JobDetail} id=${second} />`;
  if (first === "jobs") return html`<${Jobs} params=${route.params} />`;
  if (first === "runs" && second) return html`<${RunDetail} id=${second} />`;
  if (first === "runs") return html`<${Runs} params=${route.params} />`;
  if (first === "workflows" && second) return html`<${WorkflowDetail} id=${second} />`;
  if (first === "workflows") return html`<${Workflows} />`;
  if (first === "workflow-runs" && second) return html`<${WorkflowRunDetail} id=${second} params=${route.params} />`;
  if (first === "dead-letters") return html`<${DeadLetters} params=${route.params} />`;
  if (first === "overview") return html`<${Overview} />`;
  if (first === "handlers") return html`<${Handlers} />`;
  return html`<h1 tabindex="-1">Not found</h1><p>There is no page <code>${location.hash}</code>.</p>`;
}

function Shell({ onSignOut }) {
  const route = useRoute();
  const main = useRef(null);
  const current = SECTION_OF[route.path[0]] || route.path[0] || "overview";
  useEffect(() => {
    // A new page: move focus to its heading, so keyboard and screen-reader users start there.
    const heading = main.current?.querySelector("h1");
    if (heading) { heading.setAttribute("tabindex", "-1"); heading.focus({ preventScroll: true }); }
    document.title = (PAGES.find(([p]) => p === current)?.[1] || "jobsched") + " · jobsched console";
  }, [route.path.join("/")]);
  return html`<a class="skip" href="#main" onClick=${(e) => { e.preventDefault(); main.current?.querySelector("h1")?.focus(); }}>Skip to content</a>
    <header class="top">
      <span class="brand">jobsched</span>
      <nav aria-label="Pages"><ul>
        ${PAGES.map(([path, label]) => html`<li><a href=${"#/" + path} aria-current=${current === path ? "page" : undefined}>${label}</a></li>`)}
      </ul></nav>
      <span class="spacer"></span>
      <button type="button" onClick=${onSignOut}>Sign out</button>
    </header>
    <main id="main" ref=${main}><${Page} route=${route} /></main>`;
}

function App() {
  const [signedIn, setSignedIn] = useState(Boolean(session.token));
  const [config, setConfig] = useState(null);
  useEffect(() => {
    get("/ui/config.json").then(setConfig).catch(() => setConfig({ auth_mode: "token", cognito: null }));
    whenUnauthorized(() => { session.signOut(); setSignedIn(false); });
  }, []);
  if (!signedIn) return html`<${Login} config=${config} onSignedIn=${() => setSignedIn(true)} />`;
  return html`<${Shell} onSignOut=${() => { session.signOut(); setSignedIn(false); }} />`;
}

const root = document.getElementById("app");
root.textContent = ""; // the "Loading…" placeholder
render(html`<${App} />`, root);
