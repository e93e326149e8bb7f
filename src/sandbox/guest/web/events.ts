/** DOMException, Event and EventTarget: the small part of the DOM that AbortSignal needs. */

const legacyCodes: Record<string, number> = {
  IndexSizeError: 1,
  HierarchyRequestError: 3,
  WrongDocumentError: 4,
  InvalidCharacterError: 5,
  NoModificationAllowedError: 7,
  NotFoundError: 8,
  NotSupportedError: 9,
  InUseAttributeError: 10,
  InvalidStateError: 11,
  SyntaxError: 12,
  InvalidModificationError: 13,
  NamespaceError: 14,
  InvalidAccessError: 15,
  TypeMismatchError: 17,
  SecurityError: 18,
  NetworkError: 19,
  AbortError: 20,
  URLMismatchError: 21,
  QuotaExceededError: 22,
  TimeoutError: 23,
  InvalidNodeTypeError: 24,
  DataCloneError: 25,
};

const names = new WeakMap<object, string>();

export class DOMException extends Error {
  constructor(message: unknown = '', name: unknown = 'Error') {
    super(String(message));
    names.set(this, String(name));
  }
  get name(): string {
    return names.get(this) ?? 'Error';
  }
  get code(): number {
    const name = names.get(this) ?? '';
    return Object.hasOwn(legacyCodes, name) ? legacyCodes[name] : 0;
  }
}
for (const [n, c] of Object.entries(legacyCodes)) {
  const constName = n
    .replace(/([a-z])([A-Z])/g, '$1_$2')
    .toUpperCase()
    .replace(/_ERROR$/, '_ERR');
  Object.defineProperty(DOMException, constName, { value: c, enumerable: true });
  Object.defineProperty(DOMException.prototype, constName, { value: c, enumerable: true });
}

export interface EventInit {
  bubbles?: boolean;
  cancelable?: boolean;
  composed?: boolean;
}

const stopped = new WeakSet<Event>();

export class Event {
  static readonly NONE = 0;
  static readonly CAPTURING_PHASE = 1;
  static readonly AT_TARGET = 2;
  static readonly BUBBLING_PHASE = 3;
  readonly type: string;
  readonly bubbles: boolean;
  readonly cancelable: boolean;
  readonly composed: boolean;
  readonly timeStamp = Date.now();
  readonly isTrusted = false;
  defaultPrevented = false;
  target: EventTarget | null = null;
  currentTarget: EventTarget | null = null;
  eventPhase = 0;
  constructor(type: string, init: EventInit = {}) {
    if (arguments.length === 0) throw new TypeError("Failed to construct 'Event': 1 argument required");
    this.type = String(type);
    this.bubbles = !!init.bubbles;
    this.cancelable = !!init.cancelable;
    this.composed = !!init.composed;
  }
  preventDefault(): void {
    if (this.cancelable) this.defaultPrevented = true;
  }
  stopPropagation(): void {}
  stopImmediatePropagation(): void {
    stopped.add(this);
  }
  composedPath(): EventTarget[] {
    return this.currentTarget ? [this.currentTarget] : [];
  }
}

type Listener = ((e: Event) => unknown) | { handleEvent(e: Event): unknown };
interface Entry {
  listener: Listener;
  capture: boolean;
  once: boolean;
  removed: boolean;
}

const listenersOf = new WeakMap<EventTarget, Map<string, Entry[]>>();

/** Report an error thrown by a listener the way a browser would: print it, carry on. */
export function reportError(err: unknown): void {
  console.error('Uncaught', err);
}

export class EventTarget {
  constructor() {
    listenersOf.set(this, new Map());
  }
  addEventListener(type: string, listener: Listener | null, options: boolean | { capture?: boolean; once?: boolean; signal?: AbortSignalLike } = {}): void {
    if (listener == null) return;
    const opts = typeof options === 'boolean' ? { capture: options } : (options ?? {});
    const signal = opts.signal;
    if (signal?.aborted) return;
    const map = listenersOf.get(this)!;
    const list = map.get(String(type)) ?? [];
    const capture = !!opts.capture;
    if (list.some((e) => e.listener === listener && e.capture === capture)) return;
    const entry: Entry = { listener, capture, once: !!opts.once, removed: false };
    list.push(entry);
    map.set(String(type), list);
    signal?.addEventListener('abort', () => this.removeEventListener(type, listener, { capture }));
  }
  removeEventListener(type: string, listener: Listener | null, options: boolean | { capture?: boolean } = {}): void {
    const capture = typeof options === 'boolean' ? options : !!options?.capture;
    const list = listenersOf.get(this)!.get(String(type));
    if (!list) return;
    const i = list.findIndex((e) => e.listener === listener && e.capture === capture);
    if (i >= 0) {
      list[i].removed = true;
      list.splice(i, 1);
    }
  }
  dispatchEvent(event: Event): boolean {
    if (!(event instanceof Event)) throw new TypeError("Failed to execute 'dispatchEvent': parameter 1 is not of type 'Event'");
    event.target = this;
    event.currentTarget = this;
    event.eventPhase = Event.AT_TARGET;
    const handler = (this as any)[`on${event.type}`];
    const list = [...(listenersOf.get(this)!.get(event.type) ?? [])];
    if (typeof handler === 'function') list.unshift({ listener: handler, capture: false, once: false, removed: false });
    for (const entry of list) {
      if (entry.removed) continue;
      if (entry.once) this.removeEventListener(event.type, entry.listener, { capture: entry.capture });
      try {
        if (typeof entry.listener === 'function') entry.listener.call(this, event);
        else entry.listener.handleEvent(event);
      } catch (err) {
        reportError(err);
      }
      if (stopped.has(event)) break;
    }
    event.currentTarget = null;
    event.eventPhase = Event.NONE;
    return !event.defaultPrevented;
  }
}

interface AbortSignalLike {
  aborted: boolean;
  addEventListener(type: 'abort', l: () => void): void;
}
