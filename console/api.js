// The console's one way to the HTTP API: the user's own token as `Authorization: Bearer`, Pulsar's
// `{"reason": ...}` refusals turned into ApiError. The API's URL comes from config.json (the
// console's own origin locally; the HTTP API's URL on AWS, written at deploy time).

const TOKEN_KEY = "magnetar.console.token";

export class ApiError extends Error {
  constructor(status, reason) {
    super(reason || `HTTP ${status}`);
    this.status = status;
    this.reason = reason || `HTTP ${status}`;
  }
}

let config = { apiUrl: "", authentication: false };

export async function loadConfig() {
  try {
    const response = await fetch("config.json", { cache: "no-store" });
    if (response.ok) config = { ...config, ...(await response.json()) };
  } catch (_) {
    // no config.json: the API is on the console's own origin
  }
  return config;
}

export function apiUrl() {
  return (config.apiUrl || "").replace(/\/$/, "");
}

// The token lives for the browser tab only (sessionStorage): closing the tab signs out.
export function getToken() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(token) {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

// The role a token names (its `sub`), read for display only: the API checks the token.
export function tokenRole(token) {
  try {
    const payload = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    return JSON.parse(atob(payload)).sub || "";
  } catch (_) {
    return "";
  }
}

const listeners = new Set();
export function onUnauthenticated(listener) {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

export function enc(part) {
  return encodeURIComponent(part);
}

export async function api(method, path, { body, query } = {}) {
  const url = new URL(apiUrl() + path, window.location.href);
  for (const [name, value] of Object.entries(query || {})) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(name, String(value));
  }
  const headers = {};
  const token = getToken();
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (exc) {
    throw new ApiError(0, `The API did not answer (${exc.message})`);
  }
  const text = await response.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch (_) {
      data = text;
    }
  }
  if (!response.ok) {
    const reason = (data && (data.reason || data.message)) || `HTTP ${response.status}`;
    if (response.status === 401) listeners.forEach((listener) => listener(reason));
    throw new ApiError(response.status, reason);
  }
  return data;
}

// Paths of the admin API, from a topic's parts.
export function topicPath(topic) {
  return `${topic.domain}/${enc(topic.tenant)}/${enc(topic.namespace)}/${enc(topic.name)}`;
}

export function parseTopic(full) {
  const match = /^(persistent|non-persistent):\/\/([^/]+)\/([^/]+)\/(.+)$/.exec(full);
  if (!match) return null;
  return { domain: match[1], tenant: match[2], namespace: match[3], name: match[4], full };
}
