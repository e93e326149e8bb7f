/**
 * structuredClone for the types a server script passes around: primitives (not symbols), plain
 * objects, arrays, Date, RegExp, Map, Set, ArrayBuffer and views, Error types, Blob/File and boxed
 * primitives, with cycles and shared references kept. Functions, symbols and other platform
 * objects throw DataCloneError, as in browsers.
 */
import { DOMException } from './events.ts';

const errorTypes: Record<string, ErrorConstructor> = {
  Error,
  EvalError,
  RangeError,
  ReferenceError,
  SyntaxError,
  TypeError,
  URIError,
};

export function structuredClone(value: unknown, options?: { transfer?: unknown[] }): unknown {
  if (arguments.length === 0) throw new TypeError("Failed to execute 'structuredClone': 1 argument required");
  if (options?.transfer?.length) throw new DOMException('transfer is not supported', 'DataCloneError');
  return clone(value, new Map());
}

function fail(what: string): never {
  throw new DOMException(`${what} could not be cloned.`, 'DataCloneError');
}

function clone(v: unknown, seen: Map<unknown, unknown>): unknown {
  if (v === null || (typeof v !== 'object' && typeof v !== 'function' && typeof v !== 'symbol')) return v;
  if (typeof v === 'symbol') fail(String(v));
  if (typeof v === 'function') fail(String(v).slice(0, 60));
  if (seen.has(v)) return seen.get(v);
  const o = v as any;
  const tag = Object.prototype.toString.call(o);
  let out: any;
  switch (tag) {
    case '[object Date]':
      out = new Date(o.getTime());
      break;
    case '[object RegExp]':
      out = new RegExp(o.source, o.flags);
      break;
    case '[object Boolean]':
      out = Object(Boolean.prototype.valueOf.call(o));
      break;
    case '[object Number]':
      out = Object(Number.prototype.valueOf.call(o));
      break;
    case '[object String]':
      out = Object(String.prototype.valueOf.call(o));
      break;
    case '[object BigInt]':
      out = Object(BigInt.prototype.valueOf.call(o));
      break;
    case '[object ArrayBuffer]':
      out = o.slice(0);
      break;
    case '[object Map]': {
      out = new Map();
      seen.set(v, out);
      for (const [k, val] of o) out.set(clone(k, seen), clone(val, seen));
      return out;
    }
    case '[object Set]': {
      out = new Set();
      seen.set(v, out);
      for (const val of o) out.add(clone(val, seen));
      return out;
    }
    case '[object Error]': {
      const Ctor = Object.hasOwn(errorTypes, o.name) ? errorTypes[o.name] : Error;
      out = new Ctor();
      seen.set(v, out);
      if ('message' in o) Object.defineProperty(out, 'message', { value: String(o.message), writable: true, configurable: true });
      if ('stack' in o) Object.defineProperty(out, 'stack', { value: String(o.stack), writable: true, configurable: true });
      if ('cause' in o) Object.defineProperty(out, 'cause', { value: clone(o.cause, seen), writable: true, configurable: true });
      return out;
    }
    case '[object Array]': {
      out = new Array(o.length);
      seen.set(v, out);
      for (const k of Object.keys(o)) out[k] = clone(o[k], seen);
      return out;
    }
    case '[object Object]':
      // Class instances clone as plain objects of their own enumerable properties, as in browsers.
      out = {};
      seen.set(v, out);
      for (const k of Object.keys(o)) out[k] = clone(o[k], seen);
      return out;
    default:
      if (ArrayBuffer.isView(o)) {
        const buf = clone(o.buffer, seen) as ArrayBuffer;
        const Ctor = (o as any).constructor;
        out = tag === '[object DataView]' ? new DataView(buf, o.byteOffset, o.byteLength) : new Ctor(buf, o.byteOffset, (o as any).length);
        break;
      }
      if (typeof o.slice === 'function' && (tag === '[object Blob]' || tag === '[object File]')) {
        out = o.slice(0, o.size, o.type);
        break;
      }
      fail(tag.slice(8, -1));
  }
  seen.set(v, out);
  return out;
}
