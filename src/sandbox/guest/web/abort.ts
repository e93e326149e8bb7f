/** AbortController and AbortSignal (abort, timeout, any, throwIfAborted). */
import { DOMException, Event, EventTarget } from './events.ts';
import { setTimeout } from './timers.ts';

const states = new WeakMap<AbortSignal, { aborted: boolean; reason: unknown }>();
let constructing = false;

export class AbortSignal extends EventTarget {
  onabort: ((e: Event) => unknown) | null = null;
  constructor() {
    if (!constructing) throw new TypeError('Illegal constructor');
    super();
    states.set(this, { aborted: false, reason: undefined });
  }
  get aborted(): boolean {
    return states.get(this)!.aborted;
  }
  get reason(): unknown {
    return states.get(this)!.reason;
  }
  throwIfAborted(): void {
    const s = states.get(this)!;
    if (s.aborted) throw s.reason;
  }
  static abort(reason?: unknown): AbortSignal {
    const s = newSignal();
    signalAbort(s, reason);
    return s;
  }
  static timeout(ms: number): AbortSignal {
    const s = newSignal();
    setTimeout(() => signalAbort(s, new DOMException('The operation timed out.', 'TimeoutError')), ms);
    return s;
  }
  static any(signals: Iterable<AbortSignal>): AbortSignal {
    const s = newSignal();
    const list = [...signals];
    const already = list.find((x) => x.aborted);
    if (already) {
      signalAbort(s, already.reason);
      return s;
    }
    for (const x of list) x.addEventListener('abort', () => signalAbort(s, x.reason), { once: true });
    return s;
  }
}

export function newSignal(): AbortSignal {
  constructing = true;
  try {
    return new AbortSignal();
  } finally {
    constructing = false;
  }
}

export function signalAbort(signal: AbortSignal, reason?: unknown): void {
  const s = states.get(signal)!;
  if (s.aborted) return;
  s.aborted = true;
  s.reason = reason === undefined ? new DOMException('This operation was aborted', 'AbortError') : reason;
  signal.dispatchEvent(new Event('abort'));
}

const signals = new WeakMap<AbortController, AbortSignal>();

export class AbortController {
  constructor() {
    signals.set(this, newSignal());
  }
  get signal(): AbortSignal {
    return signals.get(this)!;
  }
  abort(reason?: unknown): void {
    signalAbort(signals.get(this)!, reason);
  }
}
