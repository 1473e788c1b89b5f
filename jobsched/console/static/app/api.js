// The console's only way to the server: the public HTTP API, with the signed-in bearer token.
// The token lives in sessionStorage (this tab only; gone when the tab closes).

const TOKEN_KEY = "jobsched.token";

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export const session = {
  get token() { return sessionStorage.getItem(TOKEN_KEY); },
  signIn(token) { sessionStorage.setItem(TOKEN_KEY, token); },
  signOut() { sessionStorage.removeItem(TOKEN_KEY); },
};

let onUnauthorized = () => {};
export function whenUnauthorized(callback) { onUnauthorized = callback; }

export async function api(method, path, { body, headers, token } = {}) {
  const sent = { Accept: "application/json", ...(headers || {}) };
  const bearer = token || session.token;
  if (bearer) sent.Authorization = `Bearer ${bearer}`;
  if (body !== undefined) sent["Content-Type"] = "application/json";
  const response = await fetch(path, { method, headers: sent, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await response.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = { message: text }; }
  }
  if (!response.ok) {
    const error = new ApiError(response.status, data?.error || "http_" + response.status, data?.message || response.statusText);
    if (response.status === 401 && !token) onUnauthorized(error);
    throw error;
  }
  return data;
}

export const get = (path, options) => api("GET", path, options);
export const post = (path, body, options) => api("POST", path, { ...options, body: body ?? {} });

export function query(params) {
  const q = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") q.set(key, value);
  }
  const text = q.toString();
  return text ? "?" + text : "";
}

// Every page of a list, up to `max` items: {items, more} (more: the list went on past max).
export async function listAll(path, params, max = 1000) {
  const items = [];
  let cursor = null;
  do {
    const page = await get(path + query({ ...params, limit: Math.min(200, max - items.length), cursor }));
    items.push(...page.items);
    cursor = page.next_cursor;
  } while (cursor && items.length < max);
  return { items, more: Boolean(cursor) };
}

// Sign in with the console's Cognito user pool (deployed stack, console_user_pool=true):
// InitiateAuth USER_PASSWORD_AUTH, the ID token is the API's JWT (its custom:tenant claim names the tenant).
export async function cognitoSignIn(cognito, username, password) {
  const response = await fetch(cognito.endpoint, {
    method: "POST",
    headers: {
      "Content-Type": "application/x-amz-json-1.1",
      "X-Amz-Target": "AWSCognitoIdentityProviderService.InitiateAuth",
    },
    body: JSON.stringify({
      AuthFlow: "USER_PASSWORD_AUTH",
      ClientId: cognito.client_id,
      AuthParameters: { USERNAME: username, PASSWORD: password },
    }),
  });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new ApiError(response.status, data.__type || "cognito_error", data.message || "sign-in failed");
  if (data.ChallengeName) {
    throw new ApiError(400, data.ChallengeName,
      `Cognito asks for ${data.ChallengeName}: an administrator sets a permanent password first (docs/deploy.md, "The console")`);
  }
  return data.AuthenticationResult.IdToken;
}
