/**
 * Live updates: a server-sent event stream (GET /api/v1/deliveries/stream, /api/v1/logs/stream)
 * when the server has it, else polling. Either way callers get a "something changed" tick (with
 * the message's data when there is one) and refetch what they show, so nothing depends on the
 * exact message format, and a reconnect (the browser resumes with Last-Event-ID) loses nothing:
 * the first tick after it refetches.
 *
 * The indicator says what is true: "Live" only while the stream is open (or polling answers),
 * "Reconnecting…" while the browser tries again, and "Not live" while the server is unreachable.
 */
import type { VNode } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { check, useConnection } from './connection.tsx';

export const POLL_MS = 1000;

export type LiveMode = 'connecting' | 'stream' | 'reconnecting' | 'polling';

export function useLive(url: string, events: readonly string[], onTick: (data?: unknown) => void): LiveMode {
  const [mode, setMode] = useState<LiveMode>('connecting');
  const tick = useRef(onTick);
  tick.current = onTick;
  const names = events.join(',');

  useEffect(() => {
    let timer: ReturnType<typeof setInterval> | undefined;
    let source: EventSource | undefined;
    let opened = false;
    setMode('connecting');
    const poll = () => {
      source?.close();
      source = undefined;
      if (timer) return;
      setMode('polling');
      timer = setInterval(() => tick.current(), POLL_MS);
    };
    const onMessage = (e: MessageEvent) => {
      let data: unknown = e.data;
      try {
        data = JSON.parse(e.data);
      } catch {
        /* plain text */
      }
      tick.current(data);
    };
    try {
      source = new EventSource(url);
      source.onopen = () => {
        opened = true;
        setMode('stream');
        tick.current();
      };
      for (const name of names.split(',')) source.addEventListener(name, onMessage as EventListener);
      source.onerror = () => {
        // CLOSED: the server answered, but not with a stream (an older server, 404): poll instead.
        if (source?.readyState === EventSource.CLOSED) return poll();
        // CONNECTING: the connection dropped and the browser tries again by itself. Is it the
        // server that is gone, or only this stream? The probe says, and the banner shows it.
        setMode(opened ? 'reconnecting' : 'connecting');
        void check();
      };
    } catch {
      poll();
    }
    return () => {
      if (timer) clearInterval(timer);
      source?.close();
    };
  }, [url, names]);
  return mode;
}

/** The live indicator: a dot and a word, with data-live for styles and tests. */
export function LiveIndicator({ mode }: { mode: LiveMode }): VNode {
  const reachable = useConnection().reachable;
  const state = reachable ? mode : 'offline';
  const text = {
    stream: 'Live',
    polling: `Live (polling every ${POLL_MS / 1000} s)`,
    connecting: 'Connecting…',
    reconnecting: 'Reconnecting…',
    offline: 'Not live: the server is unreachable',
  }[state];
  return (
    <span class="live" data-live={state} role="status">
      {text}
    </span>
  );
}

/**
 * `load` run on demand, never twice at once: a call while it runs asks for one more run after it,
 * so a burst of ticks costs two requests, not one per tick. Always the latest `load`.
 */
export function useCoalesced(load: () => Promise<void>): () => void {
  const latest = useRef(load);
  latest.current = load;
  const state = useRef({ running: false, again: false });
  return useRef(() => {
    const s = state.current;
    if (s.running) {
      s.again = true;
      return;
    }
    s.running = true;
    const run = (): void => {
      s.again = false;
      void latest.current().finally(() => {
        if (s.again) run();
        else s.running = false;
      });
    };
    run();
  }).current;
}
