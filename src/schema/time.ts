/**
 * Times as the management API and the CLI read them (`since`, `until`): a duration ago (`15m`, `2h`,
 * `7d`), epoch seconds (10 digits) or milliseconds (11 to 13), or an ISO 8601 date or date-time, and
 * nothing else (Date.parse alone takes `1.5` or `-1` for a day in 2001). A time is a whole
 * millisecond from 0001-01-01 to 9999-12-31: both stores compare it, as a 64-bit integer or as ISO
 * text (four-digit years sort as text), and `now - duration` stays a date.
 */
import { parseDuration } from './index.ts';

export const EARLIEST_TIME = Date.parse('0001-01-01T00:00:00.000Z');
export const LATEST_TIME = Date.parse('9999-12-31T23:59:59.999Z');

export const TIME_FORMS = 'a duration ago (15m, 2h, 7d) or a date-time (2025-01-31T12:00:00Z)';

/** `2025-01-31`, `2025-01-31T12:00`, `2025-01-31 12:00:00.5+02:00`: what Date.parse then reads as ISO 8601. */
const DATE_TIME = /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?)?$/i;

/** A value as an error message quotes it: cut short (a time may come from a body as long as its limit). */
export const quoted = (v: string) => `"${v.length > 40 ? `${v.slice(0, 40)}…` : v}"`;

/** Milliseconds since the epoch of `text`, or what is wrong with it (said after the field's name). */
export function readTime(text: string, now = Date.now()): number | { error: string; hint?: string } {
  const ago = parseDuration(text);
  const at =
    ago !== undefined
      ? now - ago
      : /^\d{10}$/.test(text)
        ? Number(text) * 1000
        : /^\d{11,13}$/.test(text)
          ? Number(text)
          : DATE_TIME.test(text.trim())
            ? Date.parse(text.trim())
            : Number.NaN;
  if (Number.isNaN(at)) return { error: `must be ${TIME_FORMS}, got ${quoted(text)}` };
  if (!(at >= EARLIEST_TIME && at <= LATEST_TIME))
    return {
      error: `must be a time from 0001-01-01 to 9999-12-31, got ${quoted(text)}`,
      ...(ago !== undefined ? { hint: `a duration ago reaches back to year 1 at most (${Math.floor((now - EARLIEST_TIME) / 86_400_000)}d today)` } : {}),
    };
  return Math.round(at);
}
