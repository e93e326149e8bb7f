/**
 * The runtime envelope (spec 4.1): multipart/form-data with `event` (JSON), `environment` (JSON)
 * and `fetch-body` (raw bytes). Decoding is strict: every malformed input is a 4xx that says what
 * is wrong, never a 5xx.
 */
import { SwitchyardError } from '../errors.ts';
import type { Envelope } from '../sandbox/index.ts';
import { readBodyLimited } from '../http/body.ts';
import { MAX_JSON_DEPTH, nestedDeeperThan } from '../lib/json-depth.ts';
import { contentTypeParam } from '../lib/header-params.ts';
import { parseMultipart, type MultipartPart } from '../lib/multipart.ts';

const utf8 = new TextDecoder();

function bad(message: string, where?: string, hint?: string): SwitchyardError {
  return new SwitchyardError('bad_request', message, { where, hint });
}

function parseJsonField(text: string, field: string): Record<string, unknown> {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw bad(`the "${field}" field is not valid JSON: ${(e as Error).message}`, field);
  }
  if (!v || typeof v !== 'object' || Array.isArray(v)) throw bad(`the "${field}" field must be a JSON object`, field);
  if (nestedDeeperThan(v, MAX_JSON_DEPTH))
    throw bad(`the "${field}" field is nested deeper than ${MAX_JSON_DEPTH} levels`, field, 'flatten the data the integration needs');
  return v as Record<string, unknown>;
}

export async function decodeEnvelope(req: Request, limit: number): Promise<Envelope> {
  const type = req.headers.get('content-type') ?? '';
  const boundary = /^multipart\/form-data\s*;/i.test(type) ? contentTypeParam(type, 'boundary') : undefined;
  if (!boundary)
    throw new SwitchyardError('unsupported_media_type', `the envelope must be multipart/form-data with a boundary, got "${type || 'no Content-Type'}"`, {
      hint: 'send fields event, environment and (for fetch events) fetch-body as multipart/form-data',
    });
  const bytes = await readBodyLimited(req, limit);
  let parts: MultipartPart[];
  try {
    parts = parseMultipart(bytes, boundary, (b) => utf8.decode(b));
  } catch (e) {
    throw bad(
      `the multipart body cannot be read: ${(e as Error).message}`,
      undefined,
      'is it truncated, sent with another boundary than its Content-Type names, or has a part no Content-Disposition: form-data; name="…"?',
    );
  }
  // The first part of each name, as FormData.get would give it.
  const field = (name: string) => parts.find((p) => p.name === name)?.content;
  const eventField = field('event');
  if (eventField === undefined) throw bad('the envelope has no "event" field', 'event');
  const event = parseJsonField(utf8.decode(eventField), 'event');
  if (typeof event.type !== 'string' || !event.type) throw bad('event.type must be a non-empty string', 'event.type');
  const envField = field('environment');
  if (envField === undefined) throw bad('the envelope has no "environment" field', 'environment');
  const environment = parseJsonField(utf8.decode(envField), 'environment');
  const fetchBody = field('fetch-body');
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
