// The server's API as the page calls it: the key from this browser's storage, URLs relative to the page (so the
// playground works behind a proxy under a path prefix), and errors as the API words them.

const KEY_STORAGE = "qwen3-tts-server.api-key";

export const apiKey = {
  get: () => localStorage.getItem(KEY_STORAGE) ?? "",
  set: (key) => (key ? localStorage.setItem(KEY_STORAGE, key) : localStorage.removeItem(KEY_STORAGE)),
};

export class ApiError extends Error {}

/** `path` (relative, e.g. "v1/models") answered as JSON, or as text or a Blob with `expect`. */
export async function api(path, { method = "GET", json, form, expect = "json" } = {}) {
  const response = await apiResponse(path, { method, json, form });
  if (expect === "blob") return response.blob();
  return expect === "text" ? response.text() : response.json();
}

/** The Response of a successful request (to read as it streams); an ApiError otherwise. */
export async function apiResponse(path, { method = "GET", json, form } = {}) {
  const headers = {};
  const key = apiKey.get();
  if (key) headers.Authorization = `Bearer ${key}`;
  let body = form;
  if (json !== undefined) {
    headers["Content-Type"] = "application/json";
    body = JSON.stringify(json);
  }
  let response;
  try {
    response = await fetch(new URL(path, document.baseURI), { method, headers, body });
  } catch (error) {
    throw new ApiError(`the server did not answer (${error.message})`);
  }
  if (!response.ok) throw new ApiError(await errorMessage(response));
  return response;
}

/** The message of OpenAI's error envelope, or the status when the body is something else. */
async function errorMessage(response) {
  const text = await response.text();
  try {
    const message = JSON.parse(text)?.error?.message;
    if (message) return message;
  } catch {
    // not JSON: a proxy's page, say
  }
  return `${response.status} ${response.statusText}`.trim();
}

/** The speech WebSocket's URL; the key goes in the query, as browsers cannot set a WebSocket's headers. */
export function speechSocketUrl() {
  return socketUrl("v1/audio/speech/ws");
}

/** A WebSocket route's URL (relative to the page), with the key in its query. */
export function socketUrl(path) {
  const url = new URL(path, document.baseURI);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  const key = apiKey.get();
  if (key) url.searchParams.set("api_key", key);
  return url;
}
