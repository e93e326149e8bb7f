/**
 * setTimeout / setInterval / queueMicrotask. Timers are host sleeps: the host arms a Node timer and
 * completes the operation when it fires. A timer still pending when its invocation ends never
 * fires (the host drops it), so nothing runs into the next invocation.
 */
import { callHost, forget } from '../bridge.ts';
import { reportError } from './events.ts';

interface Timer {
  opId: number;
  repeat: boolean;
}

const timers = new Map<number, Timer>();
let nextTimer = 1;
const MAX_DELAY = 2 ** 31 - 1;

function arm(handle: number, fn: (...a: unknown[]) => unknown, ms: number, args: unknown[], repeat: boolean): void {
  const delay = Math.min(Math.max(0, Number(ms) || 0), MAX_DELAY);
  const timer: Timer = { opId: 0, repeat };
  timers.set(handle, timer);
  callHost('sleep', delay, (id) => (timer.opId = id)).then(() => {
    if (timers.get(handle) !== timer) return;
    if (!repeat) timers.delete(handle);
    try {
      fn(...args);
    } catch (err) {
      reportError(err);
    }
    if (repeat && timers.get(handle) === timer) arm(handle, fn, delay, args, true);
  });
}

function make(repeat: boolean) {
  // biome-ignore lint/complexity/useArrowFunction: kept as written: this is the function integration code gets as setTimeout and setInterval
  return function (fn: unknown, ms?: unknown, ...args: unknown[]): number {
    if (typeof fn !== 'function') throw new TypeError('timer callback must be a function (string callbacks are not supported)');
    const handle = nextTimer++;
    arm(handle, fn as (...a: unknown[]) => unknown, Number(ms), args, repeat);
    return handle;
  };
}

export const setTimeout = make(false);
export const setInterval = make(true);

export function clearTimeout(handle?: unknown): void {
  const timer = timers.get(Number(handle));
  if (!timer) return;
  timers.delete(Number(handle));
  forget(timer.opId);
}
export const clearInterval = clearTimeout;

export function queueMicrotask(fn: unknown): void {
  if (typeof fn !== 'function') throw new TypeError("Failed to execute 'queueMicrotask': parameter 1 is not of type 'Function'");
  Promise.resolve().then(() => {
    try {
      (fn as () => void)();
    } catch (err) {
      reportError(err);
    }
  });
}

/** A new invocation starts: timers of the previous one are gone. */
export function resetTimers(): void {
  timers.clear();
}
