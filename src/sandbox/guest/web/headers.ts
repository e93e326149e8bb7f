/** Headers per the Fetch standard (no forbidden names: this is a server runtime, like Workers). */
import { slot } from './slot.ts';

export type HeadersInit = Headers | Array<[string, string]> | Record<string, string>;
export type Guard = 'none' | 'immutable';

const token = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const httpWhitespace = /^[\t\n\r ]+|[\t\n\r ]+$/g;

const listOf = slot<Array<[string, string]>>();
const guardOf = slot<Guard>();

function byteString(v: unknown, what: string): string {
  const s = String(v);
  // eslint-disable-next-line no-control-regex
  if (/[^\x00-\xff]/.test(s)) throw new TypeError(`${what} contains a character above U+00FF: ${JSON.stringify(s)}`);
  return s;
}

function checkName(name: unknown): string {
  const n = byteString(name, 'header name');
  if (!token.test(n)) throw new TypeError(`invalid header name: ${JSON.stringify(n)}`);
  return n.toLowerCase();
}

function normaliseValue(value: unknown): string {
  const v = byteString(value, 'header value').replace(httpWhitespace, '');
  if (/[\0\r\n]/.test(v)) throw new TypeError(`invalid header value: ${JSON.stringify(v)}`);
  return v;
}

export class Headers {
  constructor(init?: HeadersInit) {
    listOf.set(this, []);
    guardOf.set(this, 'none');
    if (init !== undefined && init !== null) fill(this, init);
    else if (init === null) throw new TypeError("Failed to construct 'Headers': null is not a valid initialiser");
  }
  append(name: string, value: string): void {
    if (arguments.length < 2) throw new TypeError("Failed to execute 'append' on 'Headers': 2 arguments required");
    const n = checkName(name);
    const v = normaliseValue(value);
    mutable(this);
    listOf.get(this)!.push([n, v]);
  }
  delete(name: string): void {
    const n = checkName(name);
    mutable(this);
    listOf.set(
      this,
      listOf.get(this)!.filter(([k]) => k !== n),
    );
  }
  get(name: string): string | null {
    const n = checkName(name);
    const values = listOf
      .get(this)!
      .filter(([k]) => k === n)
      .map(([, v]) => v);
    return values.length ? values.join(', ') : null;
  }
  getSetCookie(): string[] {
    return listOf
      .get(this)!
      .filter(([k]) => k === 'set-cookie')
      .map(([, v]) => v);
  }
  has(name: string): boolean {
    const n = checkName(name);
    return listOf.get(this)!.some(([k]) => k === n);
  }
  set(name: string, value: string): void {
    if (arguments.length < 2) throw new TypeError("Failed to execute 'set' on 'Headers': 2 arguments required");
    const n = checkName(name);
    const v = normaliseValue(value);
    mutable(this);
    const list = listOf.get(this)!;
    const i = list.findIndex(([k]) => k === n);
    if (i < 0) list.push([n, v]);
    else listOf.set(this, [...list.slice(0, i), [n, v], ...list.slice(i + 1).filter(([k]) => k !== n)]);
  }
  forEach(cb: (value: string, key: string, parent: Headers) => void, thisArg?: unknown): void {
    if (typeof cb !== 'function') throw new TypeError("Failed to execute 'forEach' on 'Headers': parameter 1 is not a function");
    for (let i = 0; ; i++) {
      const pairs = sortedPairs(this);
      if (i >= pairs.length) break;
      cb.call(thisArg, pairs[i][1], pairs[i][0], this);
    }
  }
  entries(): IterableIterator<[string, string]> {
    return iterate(this, (p) => p);
  }
  keys(): IterableIterator<string> {
    return iterate(this, (p) => p[0]);
  }
  values(): IterableIterator<string> {
    return iterate(this, (p) => p[1]);
  }
  [Symbol.iterator](): IterableIterator<[string, string]> {
    return this.entries();
  }
  get [Symbol.toStringTag](): string {
    return 'Headers';
  }
}

function mutable(h: Headers): void {
  if (guardOf.get(h) === 'immutable') throw new TypeError('Headers are immutable');
}

/** The sort-and-combine view the iterator exposes (set-cookie values stay separate). */
function sortedPairs(h: Headers): Array<[string, string]> {
  const list = listOf.get(h)!;
  const names = [...new Set(list.map(([k]) => k))].sort();
  const out: Array<[string, string]> = [];
  for (const n of names) {
    if (n === 'set-cookie') for (const [k, v] of list) k === n && out.push([n, v]);
    else out.push([n, h.get(n)!]);
  }
  return out;
}

const IteratorProto = Object.getPrototypeOf(Object.getPrototypeOf([][Symbol.iterator]()));
const HeadersIteratorProto = Object.create(IteratorProto, {
  [Symbol.toStringTag]: { value: 'Headers Iterator', configurable: true },
});

function iterate<T>(h: Headers, pick: (p: [string, string]) => T): IterableIterator<T> {
  let index = 0;
  const it = Object.create(HeadersIteratorProto);
  it.next = () => {
    const pairs = sortedPairs(h);
    if (index >= pairs.length) return { value: undefined, done: true };
    return { value: pick(pairs[index++]), done: false };
  };
  return it;
}

function fill(h: Headers, init: unknown): void {
  if (typeof init !== 'object' && typeof init !== 'function')
    throw new TypeError(
      "Failed to construct 'Headers': the provided value is not of type '(record<ByteString, ByteString> or sequence<sequence<ByteString>>)'",
    );
  // WebIDL: anything with @@iterator is a sequence (a Headers included, through its iterator).
  const it = (init as any)[Symbol.iterator];
  if (it !== undefined && it !== null) {
    if (typeof it !== 'function') throw new TypeError("Failed to construct 'Headers': @@iterator is not callable");
    for (const pair of init as Iterable<unknown>) {
      if (typeof pair !== 'object' || pair === null || typeof (pair as any)[Symbol.iterator] !== 'function')
        throw new TypeError("Failed to construct 'Headers': each header must be a [name, value] pair");
      const p = [...(pair as Iterable<unknown>)];
      if (p.length !== 2) throw new TypeError(`Failed to construct 'Headers': a header pair needs exactly two items, got ${p.length}`);
      h.append(p[0] as string, p[1] as string);
    }
  } else {
    for (const key of Reflect.ownKeys(init as object)) {
      const desc = Reflect.getOwnPropertyDescriptor(init as object, key);
      if (desc === undefined || !desc.enumerable) continue;
      if (typeof key === 'symbol') throw new TypeError("Failed to construct 'Headers': a record key cannot be a symbol");
      h.append(key, (init as any)[key]);
    }
  }
}

/** Internal: make a Headers object read-only (responses from fetch, Response.error/redirect). */
export function setGuard(h: Headers, guard: Guard): void {
  guardOf.set(h, guard);
}

/** Internal: the raw list, in insertion order (for sending over the bridge). */
export function headerList(h: Headers): Array<[string, string]> {
  return listOf.get(h)!.map(([k, v]) => [k, v]);
}

/** Internal: build from pairs the host already validated (lower-case names, clean values). */
export function headersFrom(pairs: Array<[string, string]>, guard: Guard = 'none'): Headers {
  const h = new Headers();
  listOf.set(
    h,
    pairs.map(([k, v]) => [k, v]),
  );
  guardOf.set(h, guard);
  return h;
}
