/**
 * The runtime envelope (spec 4.1): multipart/form-data with `event` (JSON), `environment` (JSON)
 * and `fetch-body` (raw bytes). Decoding is strict: every malformed input is a 4xx that says what
 * is wrong, never a 5xx.
 */
import { SwitchyardError } from '../errors.ts';
import type { Envelope } from '../sandbox/index.ts';

/** Read a request body up to `limit` bytes (413 beyond), whatever Content-Length claims. */
export async function readBodyLimited(req: Request, limit: number): Promise<Uint8Array> {
  const declared = Number(req.headers.get('content-length') ?? NaN);
  if (Number.isFinite(declared) && declared > limit) throw tooLarge(limit);
  if (!req.body) return new Uint8Array();
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = req.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => {});
      throw tooLarge(limit);
    }
    chunks.push(value);
  }
  const out = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

function tooLarge(limit: number): SwitchyardError {
  return new SwitchyardError('payload_too_large', `the request body is larger than ${limit} bytes`, {
    hint: 'raise server.body_limit or sandbox.request_body in config.yaml if this is expected',
    // The unread rest of the body stays in the connection: close it, or a client reusing it sees its next request reset.
    headers: { connection: 'close' },
  });
}

function bad(message: string, where?: string, hint?: string): SwitchyardError {
  return new SwitchyardError('bad_request', message, { where, hint });
}

/**
 * Deepest nesting of arrays and objects an envelope field may have. JSON.parse takes far deeper
 * input, but copying it into the sandbox recurses and fails there (a 503 for what is bad input).
 */
export const MAX_JSON_DEPTH = 64;

/** True when `value` nests arrays/objects deeper than `max` levels (walked without recursion). */
export function nestedDeeperThan(value: unknown, max: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 1]];
  while (stack.length) {
    const [v, depth] = stack.pop()!;
    if (!v || typeof v !== 'object') continue;
    if (depth > max) return true;
    for (const child of Object.values(v)) if (child && typeof child === 'object') stack.push([child, depth + 1]);
  }
  return false;
}

function parseJsonField(text: string, field: string): Record<string, unknown> {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw bad(`the "${field}" field is not valid JSON: ${(e as Error).message}`, field);
  }
  if (!v || typeof v !== 'object' || Array.isArray(v)) throw bad(`the "${field}" field must be a JSON object`, field);
  if (nestedDeeperThan(v, MAX_JSON_DEPTH)) throw bad(`the "${field}" field is nested deeper than ${MAX_JSON_DEPTH} levels`, field, 'flatten the data the integration needs');
  return v as Record<string, unknown>;
}

export async function decodeEnvelope(req: Request, limit: number): Promise<Envelope> {
  const type = req.headers.get('content-type') ?? '';
  if (!/^multipart\/form-data\s*;.*boundary=/i.test(type))
    throw new SwitchyardError('unsupported_media_type', `the envelope must be multipart/form-data with a boundary, got "${type || 'no Content-Type'}"`, {
      hint: 'send fields event, environment and (for fetch events) fetch-body as multipart/form-data',
    });
  const bytes = await readBodyLimited(req, limit);
  let form: FormData;
  try {
    form = await new Request('http://envelope.local/', { method: 'POST', headers: { 'content-type': type }, body: bytes }).formData();
  } catch (e) {
    throw bad(`the multipart body cannot be read (${(e as Error).message}); is it truncated?`);
  }
  const eventField = form.get('event');
  if (eventField === null) throw bad('the envelope has no "event" field', 'event');
  const event = parseJsonField(typeof eventField === 'string' ? eventField : await eventField.text(), 'event');
  if (typeof event.type !== 'string' || !event.type) throw bad('event.type must be a non-empty string', 'event.type');
  const envField = form.get('environment');
  if (envField === null) throw bad('the envelope has no "environment" field', 'environment');
  const environment = parseJsonField(typeof envField === 'string' ? envField : await envField.text(), 'environment');
  const bodyField = form.get('fetch-body');
  let fetchBody: Uint8Array | undefined;
  if (bodyField !== null) fetchBody = typeof bodyField === 'string' ? new TextEncoder().encode(bodyField) : new Uint8Array(await bodyField.arrayBuffer());
  if (event.type === 'fetch') {
    const r = event.request as { method?: unknown; url?: unknown; headers?: unknown } | undefined;
    if (!r || typeof r !== 'object') throw bad('a fetch event needs event.request = {method, url, headers}', 'event.request');
    if (typeof r.method !== 'string' || !/^[A-Z]+$/i.test(r.method)) throw bad('event.request.method must be an HTTP method', 'event.request.method');
    try {
      new URL(String(r.url));
    } catch {
      throw bad('event.request.url must be an absolute URL', 'event.request.url');
    }
    if (r.headers !== undefined && !Array.isArray(r.headers) && (typeof r.headers !== 'object' || r.headers === null))
      throw bad('event.request.headers must be a list of [name, value] pairs or an object', 'event.request.headers');
  }
  return { event: event as Envelope['event'], environment, ...(fetchBody ? { fetchBody } : {}) };
}

/** Build the multipart body of an envelope (the platform side; tests and tools). */
export function encodeEnvelope(envelope: Envelope): FormData {
  const form = new FormData();
  form.set('event', JSON.stringify(envelope.event));
  form.set('environment', JSON.stringify(envelope.environment));
  if (envelope.fetchBody) form.set('fetch-body', new Blob([envelope.fetchBody as Uint8Array<ArrayBuffer>]), 'body');
  return form;
}
