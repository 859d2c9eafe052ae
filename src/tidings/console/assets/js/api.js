// The broker's HTTP API, from the page's own origin (no other host is ever called).
export class ApiError extends Error {
  constructor(status, body) {
    const error = (body && body.error) || { code: "http_error", message: `HTTP ${status}` };
    super(error.message);
    this.status = status;
    this.code = error.code;
    this.field = error.field;
  }
}

export async function call(method, path, { body, token, query } = {}) {
  const url = new URL(path, location.origin);
  for (const [key, value] of Object.entries(query || {})) url.searchParams.set(key, value);
  const headers = {};
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (token) headers.Authorization = `Bearer ${token}`;
  const response = await fetch(url, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  const data = text ? JSON.parse(text) : null;
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

// What the console remembers in this browser: the admin token and the subscriber in use.
export const saved = {
  get(key) {
    try { return JSON.parse(localStorage.getItem(`tidings.${key}`)); } catch { return null; }
  },
  set(key, value) {
    if (value === null) localStorage.removeItem(`tidings.${key}`);
    else localStorage.setItem(`tidings.${key}`, JSON.stringify(value));
  },
};

export function describe(error) {
  if (error instanceof ApiError) {
    return `${error.status} ${error.code}: ${error.message}${error.field ? ` (${error.field})` : ""}`;
  }
  return String(error);
}
