/**
 * The management API from the browser: same-origin requests carried by the session cookie, with
 * the session's CSRF value on every write. Errors keep the server's code, hint and field problems;
 * a request that never got an answer marks the server unreachable (connection.tsx).
 */
import { reportReachable, reportUnreachable, UnreachableError } from './connection.tsx';

export interface Problem {
  where: string;
  message: string;
  hint?: string;
}

export class ApiError extends Error {
  status: number;
  code: string;
  hint?: string;
  where?: string;
  problems: Problem[];
  /** The answer's x-request-id: an invocation of integration code is in the logs under it. */
  requestId?: string;
  constructor(status: number, body: { code?: string; message?: string; hint?: string; where?: string; problems?: Problem[] } | undefined, requestId?: string) {
    super(body?.message ?? `request failed (${status})`);
    this.status = status;
    this.code = body?.code ?? 'error';
    this.hint = body?.hint;
    this.where = body?.where;
    this.problems = body?.problems ?? [];
    this.requestId = requestId;
  }
}

let csrf = '';
let onUnauthorized: () => void = () => {};

export function setCsrf(value: string): void {
  csrf = value;
}

export function whenUnauthorized(fn: () => void): void {
  onUnauthorized = fn;
}

export async function api<T = any>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET') headers['x-switchyard-csrf'] = csrf;
  let res: Response;
  let text: string;
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'same-origin' });
    text = await res.text();
  } catch {
    reportUnreachable();
    throw new UnreachableError();
  }
  // A proxy in front says the server behind it does not answer.
  if ((res.status === 502 || res.status === 504) && !text.startsWith('{')) {
    reportUnreachable();
    throw new UnreachableError();
  }
  reportReachable();
  let parsed: any;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  if (!res.ok) {
    if (res.status === 401) onUnauthorized();
    // Management API errors are {error: {code, message, ...}}; integration code may answer {error: "text"}.
    const err = typeof parsed?.error === 'string' ? { message: parsed.error } : parsed?.error;
    throw new ApiError(res.status, err ?? { message: text.slice(0, 200) || res.statusText }, res.headers.get('x-request-id') ?? undefined);
  }
  return parsed as T;
}

/** The text to show for any failure. */
export function errorText(e: unknown): string {
  if (e instanceof ApiError) return `${e.message}${e.hint ? ` (${e.hint})` : ''}`;
  return e instanceof Error ? e.message : String(e);
}

// Shapes of the management API (see the README); only the fields the console reads.

export interface PropertyDef {
  type: 'string' | 'number' | 'boolean' | 'button';
  title?: string;
  description?: string;
  default?: unknown;
  enum?: string[];
  completion_url?: string;
  button_text?: string;
  callback_url?: string;
}

export interface ConfigurationsDef {
  /** GitBook: the component that draws this configuration screen. */
  componentId?: string;
  properties?: Record<string, PropertyDef>;
  required?: string[];
}

export interface Integration {
  name: string;
  title: string | null;
  status: string;
  serving: boolean;
  version: string | null;
  dir: string;
  loadedAt: string | null;
  updatedAt: string;
  errors: Problem[];
  warnings: Problem[];
  manifest: {
    description: string;
    summary: string | null;
    organization: string;
    visibility: string;
    categories: string[];
    script: string | null;
    icon: string | null;
    previewImages: string[];
    externalLinks: Array<{ label: string; url: string }>;
    secrets: string[];
  } | null;
  scopes: string[];
  blocks: Array<{ id: string; title: string; description: string }>;
  configurations: { account?: ConfigurationsDef; space?: ConfigurationsDef; site?: ConfigurationsDef };
}

/** An installation as the API answers it: the type of the schema that documents and checks it (types only: nothing of it is bundled). */
export type { InstallationView as Installation } from '../../installations/api.ts';
export type { CatalogueEntry, LinkAnswer } from '../../installations/api.ts';

// The server's own JSON shapes (src/webhooks/views.ts has no Node imports), so the two cannot drift.
export type { Attempt, Delivery, DeliveryDetail } from '../../webhooks/views.ts';
export { DELIVERY_STATUSES } from '../../webhooks/views.ts';
export { sentEventId } from '../../webhooks/body.ts';
export { signatureHeaderName } from '../../webhooks/schemes.ts';
export type { DeliveryStats, EndpointStats, StatsBucket, Percentiles } from '../../webhooks/views.ts';
export type { HandlerRun } from '../../events/handler-views.ts';
export type { InvocationView } from '../../runtime/invocation-view.ts';

// The server's rule for which configuration section an installation's target uses (no Node imports).
export { CONFIGURATION_SECTIONS, sectionFor } from '../../manifest/sections.ts';

export { EVENT_TYPES, WEBHOOK_EVENT_TYPES } from '../../events/event-types.ts';
