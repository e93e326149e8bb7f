/**
 * The client side of the live feeds (server-sent events): follow a stream until stopped, and when
 * the connection drops, reconnect with the last id received, so nothing recorded in between is
 * missed (the server reads by cursor). Only the first connection's failure is an error: after
 * that, the command says it lost the server and keeps trying until interrupted.
 */
import { errorCodeOf, SwitchyardError } from '../errors.ts';
import type { ApiClient } from './client.ts';

export interface FeedEvent {
  id?: string;
  event: string;
  data: any;
}

export interface FollowOptions {
  /** Resume after this cursor; undefined starts from now (the server's newest). */
  after?: string;
  signal: AbortSignal;
  onEvent(e: FeedEvent): void;
  /** The connection is up and the stream starts after `cursor`. */
  onReady?(cursor: string): void;
  /** The connection dropped; reconnecting after `cursor`. */
  onDisconnect?(error: Error | undefined): void;
  retryMs?: number;
}

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => (clearTimeout(t), resolve()), { once: true });
  });

/** Parse `text/event-stream` chunks into events (comments and `retry:` lines are skipped). */
export function createSseParser(emit: (e: { id?: string; event: string; data: string }) => void): (chunk: string) => void {
  let buffer = '';
  let id: string | undefined;
  let event = 'message';
  let data: string[] = [];
  return (chunk) => {
    buffer += chunk;
    let nl: number;
    while ((nl = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, nl).replace(/\r$/, '');
      buffer = buffer.slice(nl + 1);
      if (line === '') {
        if (data.length) emit({ id, event, data: data.join('\n') });
        id = undefined;
        event = 'message';
        data = [];
        continue;
      }
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (field === 'id') id = value;
      else if (field === 'event') event = value;
      else if (field === 'data') data.push(value);
    }
  };
}

async function errorOf(res: Response): Promise<SwitchyardError> {
  let body: any;
  try {
    body = await res.json();
  } catch {
    body = undefined;
  }
  return new SwitchyardError(errorCodeOf(body?.error?.code, res.status), body?.error?.message ?? `the server answered ${res.status}`, {
    hint: body?.error?.hint,
    where: body?.error?.where,
  });
}

/** Follow `path` until `signal` aborts. Resolves on abort; rejects when the first connection fails. */
export async function follow(client: ApiClient, path: string, query: Record<string, string | undefined>, opts: FollowOptions): Promise<void> {
  let cursor = opts.after;
  let connectedOnce = false;
  while (!opts.signal.aborted) {
    const qs = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== '') qs.set(k, v);
    if (cursor !== undefined) qs.set('after', cursor);
    let lost: Error | undefined;
    try {
      const res = await client.raw(`${path}?${qs}`, { headers: { accept: 'text/event-stream' }, signal: opts.signal });
      if (!res.ok || !res.body) throw await errorOf(res);
      connectedOnce = true;
      const decoder = new TextDecoder();
      const parse = createSseParser((e) => {
        if (e.id !== undefined) cursor = e.id;
        const data = JSON.parse(e.data);
        if (e.event === 'ready') {
          cursor ??= data.cursor;
          opts.onReady?.(cursor!);
        } else opts.onEvent({ id: e.id, event: e.event, data });
      });
      for await (const chunk of res.body) parse(decoder.decode(chunk as Uint8Array, { stream: true }));
    } catch (e) {
      if (opts.signal.aborted) return;
      // Refusals (bad token, bad filter) are final; only a lost connection is retried.
      if (!connectedOnce || (e instanceof SwitchyardError && e.code !== 'server_unreachable')) throw e;
      lost = e as Error;
    }
    if (opts.signal.aborted) return;
    opts.onDisconnect?.(lost);
    await sleep(opts.retryMs ?? 1000, opts.signal);
  }
}

/** An AbortSignal that fires on Ctrl-C or SIGTERM: the way to stop a follow. */
export function interruptSignal(): AbortSignal {
  const ac = new AbortController();
  const stop = () => ac.abort();
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  return ac.signal;
}
