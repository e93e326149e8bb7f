/**
 * Platform event types and their payloads (spec 2.8, 6.1, 6.2): validation with field paths,
 * and realistic sample payloads for `switchyard events send`.
 */
import { randomBytes } from 'node:crypto';
import { isIP } from 'node:net';
import type { Problem } from '../errors.ts';
import { timeOrderedId } from '../ids.ts';
import { EVENT_TYPES, WEBHOOK_EVENT_TYPES } from './event-types.ts';

/** Most events in one batch request. */
export const MAX_BATCH_EVENTS = 1000;

export { EVENT_TYPES, WEBHOOK_EVENT_TYPES };

/** `evt_` + a time-ordered id (see src/ids.ts). */
export const newEventId = (now = Date.now()): string => timeOrderedId('evt', now);

/** `string`: non-empty; `text`: a string that may be empty (a direct visit has no referrer). */
type Field = 'string' | 'text' | 'url' | 'visitor' | 'feedback';

/** Required fields per type beyond the common ones. Payloads of 6.1-only types are "not shown": we ask for the ids they obviously carry. */
const FIELDS: Record<string, Record<string, Field>> = {
  space_content_updated: { spaceId: 'string', revisionId: 'string' },
  site_view: { siteId: 'string', visitor: 'visitor', url: 'url', referrer: 'text' },
  page_feedback: { siteId: 'string', spaceId: 'string', pageId: 'string', feedback: 'feedback', visitor: 'visitor', url: 'url', referrer: 'text' },
  installation_setup: {},
  space_installation_setup: { spaceId: 'string' },
  site_installation_setup: { siteId: 'string' },
  space_view: { spaceId: 'string' },
  space_visibility_updated: { spaceId: 'string' },
  space_gitsync_started: { spaceId: 'string' },
  space_gitsync_completed: { spaceId: 'string' },
};

/** eventId and installationId: stored and looked up by, so bounded. */
const MAX_ID_LENGTH = 200;
const ID = /^[A-Za-z0-9_.:-]{1,200}$/;

function kind(v: unknown): string {
  if (v === undefined) return 'nothing';
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'an object';
  if (typeof v === 'string') return `the string "${v.length > 40 ? `${v.slice(0, 40)}…` : v}"`;
  return `${typeof v} ${String(v)}`;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function checkVisitor(v: unknown, where: string, type: string, out: Problem[]): void {
  if (v === undefined) {
    out.push({ where, message: `is required for ${type} (an object {anonymousId, userAgent, ip, cookies})` });
    return;
  }
  if (!isObject(v)) {
    out.push({ where, message: `must be an object {anonymousId, userAgent, ip, cookies}, got ${kind(v)}` });
    return;
  }
  for (const k of ['anonymousId', 'userAgent', 'ip'] as const)
    if (typeof v[k] !== 'string')
      out.push({ where: `${where}.${k}`, message: v[k] === undefined ? 'is required (a string)' : `must be a string, got ${kind(v[k])}` });
  if (typeof v.ip === 'string' && v.ip !== '' && !isIP(v.ip)) out.push({ where: `${where}.ip`, message: `"${v.ip}" is not an IP address` });
  if (!isObject(v.cookies)) {
    out.push({
      where: `${where}.cookies`,
      message: v.cookies === undefined ? 'is required (an object of cookie name to value; may be empty)' : `must be an object, got ${kind(v.cookies)}`,
    });
  } else {
    for (const [name, value] of Object.entries(v.cookies))
      if (typeof value !== 'string') out.push({ where: `${where}.cookies.${name}`, message: `must be a string, got ${kind(value)}` });
  }
}

function checkFeedback(v: unknown, where: string, type: string, out: Problem[]): void {
  if (v === undefined) {
    out.push({ where, message: `is required for ${type} (an object {rating, comment})` });
    return;
  }
  if (!isObject(v)) {
    out.push({ where, message: `must be an object {rating, comment}, got ${kind(v)}` });
    return;
  }
  if (typeof v.rating !== 'string' || !v.rating)
    out.push({
      where: `${where}.rating`,
      message: v.rating === undefined ? 'is required (a string, e.g. "good")' : `must be a non-empty string, got ${kind(v.rating)}`,
    });
  if (typeof v.comment !== 'string')
    out.push({
      where: `${where}.comment`,
      message: v.comment === undefined ? 'is required (a string; may be empty)' : `must be a string, got ${kind(v.comment)}`,
    });
}

/** Every problem of an event payload, each with its field path (`visitor.cookies.x`). Empty when valid. */
export function validateEventPayload(payload: unknown): Problem[] {
  const out: Problem[] = [];
  if (!isObject(payload)) return [{ where: '(body)', message: `an event must be a JSON object, got ${kind(payload)}` }];
  if (payload.eventId !== undefined && (typeof payload.eventId !== 'string' || !ID.test(payload.eventId)))
    out.push({
      where: 'eventId',
      message: `must be a string of 1-200 letters, digits or _ . : -, got ${kind(payload.eventId)}`,
      hint: 'leave it out to have one generated',
    });
  if (payload.installationId !== undefined && (typeof payload.installationId !== 'string' || !payload.installationId))
    out.push({ where: 'installationId', message: `must be a non-empty string, got ${kind(payload.installationId)}` });
  else if (typeof payload.installationId === 'string' && payload.installationId.length > MAX_ID_LENGTH)
    out.push({ where: 'installationId', message: `must be at most ${MAX_ID_LENGTH} characters (it has ${payload.installationId.length})` });
  if (typeof payload.type !== 'string') {
    out.push({
      where: 'type',
      message: payload.type === undefined ? 'is required' : `must be a string, got ${kind(payload.type)}`,
      hint: `one of ${EVENT_TYPES.join(', ')}`,
    });
    return out;
  }
  const fields = FIELDS[payload.type];
  if (!fields) {
    out.push({ where: 'type', message: `"${payload.type}" is not a platform event type`, hint: `one of ${EVENT_TYPES.join(', ')}` });
    return out;
  }
  for (const [name, f] of Object.entries(fields)) {
    const v = payload[name];
    if (f === 'visitor') checkVisitor(v, name, payload.type, out);
    else if (f === 'feedback') checkFeedback(v, name, payload.type, out);
    else if (typeof v !== 'string' || (f === 'string' && !v)) {
      out.push({
        where: name,
        message:
          v === undefined
            ? `is required for ${payload.type} (a string${f === 'text' ? ', may be empty' : ''})`
            : `must be a ${f === 'text' ? '' : 'non-empty '}string, got ${kind(v)}`,
      });
    } else if (f === 'url') {
      let ok = false;
      try {
        ok = /^https?:$/.test(new URL(v).protocol);
      } catch {
        ok = false;
      }
      if (!ok) out.push({ where: name, message: `"${v}" is not an absolute http(s) URL` });
    }
  }
  return out;
}

const visitor = () => ({
  anonymousId: `anon_${randomBytes(6).toString('hex')}`,
  userAgent: 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36',
  ip: '203.0.113.7',
  cookies: { theme: 'dark' },
});

const samples: Record<string, () => Record<string, unknown>> = {
  space_content_updated: () => ({ spaceId: 'space_demo', revisionId: `rev_${randomBytes(4).toString('hex')}` }),
  site_view: () => ({ siteId: 'site_demo', visitor: visitor(), url: 'https://docs.example.com/getting-started', referrer: 'https://www.example.com/' }),
  page_feedback: () => ({
    siteId: 'site_demo',
    spaceId: 'space_demo',
    pageId: 'page_getting_started',
    feedback: { rating: 'good', comment: 'Clear and short, thanks!' },
    visitor: visitor(),
    url: 'https://docs.example.com/getting-started',
    referrer: '',
  }),
  installation_setup: () => ({}),
  space_installation_setup: () => ({ spaceId: 'space_demo' }),
  site_installation_setup: () => ({ siteId: 'site_demo' }),
  space_view: () => ({ spaceId: 'space_demo' }),
  space_visibility_updated: () => ({ spaceId: 'space_demo' }),
  space_gitsync_started: () => ({ spaceId: 'space_demo' }),
  space_gitsync_completed: () => ({ spaceId: 'space_demo' }),
};

/** Set `a.b.c` in a nested object, creating objects on the way. */
export function setPath(target: Record<string, unknown>, path: string, value: unknown): void {
  const keys = path.split('.');
  let o: Record<string, unknown> = target;
  for (const k of keys.slice(0, -1)) {
    if (!isObject(o[k])) o[k] = {};
    o = o[k] as Record<string, unknown>;
  }
  o[keys[keys.length - 1]] = value;
}

/** A valid sample event of `type` with a fresh eventId; `overrides` keys may be dotted paths (`visitor.ip`). */
export function samplePayload(type: string, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  const make = samples[type];
  if (!make) throw new RangeError(`"${type}" is not a platform event type (one of ${EVENT_TYPES.join(', ')})`);
  const event: Record<string, unknown> = { eventId: newEventId(), type, ...make() };
  for (const [k, v] of Object.entries(overrides)) setPath(event, k, v);
  return event;
}
