/**
 * Live updates of deliveries: the server-sent event stream GET /api/v1/deliveries/stream when the
 * server has it, else polling. Either way callers get a "something changed" tick (with the
 * message's data when there is one) and refetch what they show, so the stream's exact message
 * format does not matter here.
 */
import { useEffect, useRef, useState } from 'preact/hooks';

export const STREAM_URL = '/api/v1/deliveries/stream';
export const POLL_MS = 1000;

export type LiveMode = 'connecting' | 'stream' | 'polling';

export function useLive(onTick: (data?: unknown) => void): LiveMode {
  const [mode, setMode] = useState<LiveMode>('connecting');
  const tick = useRef(onTick);
  tick.current = onTick;

  useEffect(() => {
    let timer: ReturnType<typeof setInterval> | undefined;
    let source: EventSource | undefined;
    let opened = false;
    const poll = () => {
      if (timer) return;
      setMode('polling');
      timer = setInterval(() => tick.current(), POLL_MS);
    };
    const stopPolling = () => {
      if (timer) clearInterval(timer);
      timer = undefined;
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
      source = new EventSource(STREAM_URL);
      source.onopen = () => {
        opened = true;
        stopPolling();
        setMode('stream');
        tick.current();
      };
      source.onmessage = onMessage;
      // Named events (`event: attempt` …) do not reach onmessage: listen for the likely names too.
      for (const name of ['delivery', 'attempt', 'deliveries', 'update']) source.addEventListener(name, onMessage as EventListener);
      source.onerror = () => {
        if (!opened) {
          // No stream on this server (404 or not an event stream): poll instead.
          source?.close();
          source = undefined;
          poll();
        } else if (source?.readyState !== EventSource.OPEN) {
          // The browser reconnects by itself; poll until it does.
          poll();
        }
      };
    } catch {
      poll();
    }
    return () => {
      stopPolling();
      source?.close();
    };
  }, []);
  return mode;
}
