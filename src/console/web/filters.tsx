/**
 * Filters kept in the page's address (`#/deliveries?status=failed&since=1h`): a filtered view can
 * be bookmarked, shared and reached again with Back. The fields here change the address; the pages
 * read it and ask the server (the filtering itself is the API's).
 */
import type { ComponentChildren, VNode } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { fromLocalInput, toLocalInput } from './time.tsx';

/** The hash route `path` with these query parameters (empty ones left out). */
export function hrefOf(path: string, params: Record<string, string | undefined> | URLSearchParams): string {
  const q = new URLSearchParams();
  const entries = params instanceof URLSearchParams ? [...params] : Object.entries(params);
  for (const [k, v] of entries) if (v) q.set(k, v);
  const s = q.toString();
  return `${path}${s ? `?${s}` : ''}`;
}

/** The query with some parameters changed (undefined or '' removes one); paging starts over unless `cursor` is given. */
export function withParams(query: URLSearchParams, changes: Record<string, string | undefined>): URLSearchParams {
  const next = new URLSearchParams(query);
  if (!('cursor' in changes)) next.delete('cursor');
  for (const [k, v] of Object.entries(changes)) {
    if (v) next.set(k, v);
    else next.delete(k);
  }
  return next;
}

export function navigate(path: string, params: URLSearchParams): void {
  location.hash = hrefOf(path, params);
}

/** The API's query string for these filter names, taken from the page's query. */
export function apiQuery(query: URLSearchParams, names: readonly string[], extra: Record<string, string | undefined> = {}): string {
  const q = new URLSearchParams();
  for (const n of names) {
    const v = query.get(n);
    if (v) q.set(n, v);
  }
  for (const [k, v] of Object.entries(extra)) if (v) q.set(k, v);
  return q.toString();
}

export function FilterBar({ label, children }: { label: string; children: ComponentChildren }): VNode {
  return (
    <div class="filters" role="group" aria-label={label}>
      {children}
    </div>
  );
}

export function SelectFilter({
  id,
  label,
  value,
  options,
  onChange,
}: {
  id: string;
  label: string;
  value: string;
  options: Array<{ value: string; label: string }>;
  onChange(v: string): void;
}): VNode {
  // A value the list does not know (typed in the address) is still shown and kept.
  const all = value && !options.some((o) => o.value === value) ? [...options, { value, label: value }] : options;
  return (
    <div class="field">
      <label for={id}>{label}</label>
      <select id={id} value={value} onChange={(e) => onChange((e.currentTarget as HTMLSelectElement).value)}>
        {all.map((o) => (
          <option key={o.value} value={o.value}>
            {o.label}
          </option>
        ))}
      </select>
    </div>
  );
}

const RANGES = [
  { value: '', label: 'Any time' },
  { value: '15m', label: 'Last 15 minutes' },
  { value: '1h', label: 'Last hour' },
  { value: '24h', label: 'Last 24 hours' },
  { value: '7d', label: 'Last 7 days' },
  { value: 'custom', label: 'Between…' },
];

/**
 * since/until: a preset (`since=1h`) or two local date-times (sent as ISO instants). `onChange`
 * gets both; the custom fields apply when both are valid or one is cleared.
 */
export function TimeRange({ since, until, onChange }: { since: string; until: string; onChange(since?: string, until?: string): void }): VNode {
  const preset = !until && RANGES.some((r) => r.value === since && r.value !== 'custom');
  const [custom, setCustom] = useState(!preset);
  const [from, setFrom] = useState(toLocalInput(preset ? undefined : since));
  const [to, setTo] = useState(toLocalInput(until));
  useEffect(() => {
    setCustom(!preset);
    if (!preset) {
      setFrom(toLocalInput(since));
      setTo(toLocalInput(until));
    }
  }, [since, until]);
  const apply = (f: string, t: string) => onChange(fromLocalInput(f), fromLocalInput(t));
  return (
    <>
      <div class="field">
        <label for="f-range">Time</label>
        <select
          id="f-range"
          value={custom ? 'custom' : since}
          onChange={(e) => {
            const v = (e.currentTarget as HTMLSelectElement).value;
            if (v === 'custom') setCustom(true);
            else {
              setCustom(false);
              onChange(v || undefined, undefined);
            }
          }}
        >
          {RANGES.map((r) => (
            <option key={r.value} value={r.value}>
              {r.label}
            </option>
          ))}
        </select>
      </div>
      {custom ? (
        <>
          <div class="field">
            <label for="f-from">From</label>
            <input
              id="f-from"
              type="datetime-local"
              step={1}
              value={from}
              onChange={(e) => (setFrom((e.currentTarget as HTMLInputElement).value), apply((e.currentTarget as HTMLInputElement).value, to))}
            />
          </div>
          <div class="field">
            <label for="f-to">To</label>
            <input
              id="f-to"
              type="datetime-local"
              step={1}
              value={to}
              onChange={(e) => (setTo((e.currentTarget as HTMLInputElement).value), apply(from, (e.currentTarget as HTMLInputElement).value))}
            />
          </div>
        </>
      ) : null}
    </>
  );
}

/** Newest first, one page at a time: back to the newest page, or on to older ones (the API's cursor). */
export function Pager({ query, path, nextCursor }: { query: URLSearchParams; path: string; nextCursor: string | null | undefined }): VNode | null {
  const paged = !!query.get('cursor');
  if (!paged && !nextCursor) return null;
  return (
    <nav class="row pager" aria-label="Pages">
      {paged ? (
        <a class="button secondary small" href={hrefOf(path, withParams(query, {}))}>
          ← Newest
        </a>
      ) : null}
      {nextCursor ? (
        <a class="button secondary small" href={hrefOf(path, withParams(query, { cursor: nextCursor }))}>
          Older →
        </a>
      ) : (
        <span class="muted small">No older ones.</span>
      )}
    </nav>
  );
}
