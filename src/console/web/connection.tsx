/**
 * Whether the server answers at all. Any request that fails at the network level (or that a proxy
 * answers 502/504) marks it unreachable; from then on a probe asks GET /console/session every
 * PROBE_MS until it answers, and any answer marks it reachable again. Pages show one banner for it
 * and their live indicators say they are not live, instead of each showing "Failed to fetch".
 */
import type { VNode } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { formatTime } from './time.tsx';

export const PROBE_MS = 2000;

export interface Connection {
  reachable: boolean;
  /** When it stopped answering (ms since the epoch). */
  since?: number;
}

let state: Connection = { reachable: true };
const listeners = new Set<(c: Connection) => void>();
let probe: ReturnType<typeof setTimeout> | undefined;

function set(next: Connection): void {
  state = next;
  for (const l of listeners) l(state);
}

/** The error a request failed with when the server could not be reached. */
export class UnreachableError extends Error {
  constructor() {
    super('The server cannot be reached.');
  }
}

export function reportReachable(): void {
  if (probe) clearTimeout(probe);
  probe = undefined;
  if (!state.reachable) set({ reachable: true });
}

export function reportUnreachable(): void {
  if (state.reachable) set({ reachable: false, since: Date.now() });
  if (!probe) probe = setTimeout(() => void check(), PROBE_MS);
}

/** Ask the server now (a live stream dropped: is it the server, or just the stream?). */
export async function check(): Promise<boolean> {
  probe = undefined;
  try {
    const res = await fetch('/console/session', { credentials: 'same-origin', cache: 'no-store' });
    if (res.status === 502 || res.status === 504) throw new UnreachableError();
    reportReachable();
    return true;
  } catch {
    reportUnreachable();
    return false;
  }
}

export function connection(): Connection {
  return state;
}

export function useConnection(): Connection {
  const [c, setC] = useState(state);
  useEffect(() => {
    listeners.add(setC);
    setC(state);
    return () => void listeners.delete(setC);
  }, []);
  return c;
}

/** At the top of every page while the server does not answer. */
export function ConnectionBanner(): VNode | null {
  const c = useConnection();
  if (c.reachable) return null;
  return (
    <div class="banner" role="alert" data-testid="unreachable">
      <strong>The server is unreachable</strong> (since {formatTime(new Date(c.since ?? Date.now()).toISOString())}). What you see may be out of date; the
      console keeps trying every {PROBE_MS / 1000} s and catches up when it answers.
    </div>
  );
}
