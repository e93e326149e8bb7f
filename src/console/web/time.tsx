/**
 * Times as the console shows them: the browser's local date and time, always both
 * (`2025-01-31 13:05:09`), the same on every page whatever the browser's locale; the exact UTC
 * instant goes in the element's title.
 */

const pad = (n: number, w = 2) => String(n).padStart(w, '0');

export function formatDate(d: Date): string {
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
}

export function formatClock(d: Date, seconds = true): string {
  return `${pad(d.getHours())}:${pad(d.getMinutes())}${seconds ? `:${pad(d.getSeconds())}` : ''}`;
}

/** `2025-01-31 13:05:09` in local time; the input unchanged when it is not a date. */
export function formatTime(iso: string): string {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return `${formatDate(d)} ${formatClock(d)}`;
}

/** A `<input type="datetime-local">` value (local time) for an ISO instant, and back. */
export function toLocalInput(iso: string | undefined): string {
  if (!iso) return '';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? '' : `${formatDate(d)}T${formatClock(d)}`;
}

export function fromLocalInput(value: string): string | undefined {
  if (!value) return undefined;
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? undefined : d.toISOString();
}
