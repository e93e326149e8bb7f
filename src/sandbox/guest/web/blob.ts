/** Blob and File over in-memory bytes. */
import { utf8Decode, utf8Encode } from './encoding.ts';
import { readableFromBytes, type ReadableStream } from './streams.ts';

const bytesOf = new WeakMap<Blob, Uint8Array>();

export type BlobPart = string | ArrayBuffer | ArrayBufferView | Blob;

function normaliseType(t: unknown): string {
  const s = t === undefined ? '' : String(t);
  return /[^\x20-\x7e]/.test(s) ? '' : s.toLowerCase();
}

export function toBytes(part: unknown, endings: 'transparent' | 'native' = 'transparent'): Uint8Array {
  if (part instanceof Blob) return bytesOf.get(part)!;
  if (part instanceof ArrayBuffer) return new Uint8Array(part.slice(0));
  if (ArrayBuffer.isView(part)) return new Uint8Array(part.buffer.slice(part.byteOffset, part.byteOffset + part.byteLength));
  let s = String(part);
  if (endings === 'native') s = s.replace(/\r\n|\r/g, '\n');
  return utf8Encode(s);
}

export function concatBytes(chunks: Uint8Array[]): Uint8Array {
  let size = 0;
  for (const c of chunks) size += c.byteLength;
  const out = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

export class Blob {
  #type: string;
  constructor(parts: Iterable<BlobPart> = [], options: { type?: string; endings?: 'transparent' | 'native' } = {}) {
    if (parts === null || (typeof parts !== 'object' && typeof parts !== 'function') || typeof (parts as any)[Symbol.iterator] !== 'function') {
      if (parts !== undefined) throw new TypeError("Failed to construct 'Blob': The provided value cannot be converted to a sequence.");
    }
    const endings = options?.endings ?? 'transparent';
    if (endings !== 'transparent' && endings !== 'native') throw new TypeError(`Failed to construct 'Blob': invalid endings '${endings}'`);
    const chunks: Uint8Array[] = [];
    for (const p of parts ?? []) chunks.push(toBytes(p, endings));
    bytesOf.set(this, chunks.length === 1 ? chunks[0] : concatBytes(chunks));
    this.#type = normaliseType(options?.type);
  }
  get size(): number {
    return bytesOf.get(this)!.byteLength;
  }
  get type(): string {
    return this.#type;
  }
  slice(start?: number, end?: number, contentType?: string): Blob {
    const b = bytesOf.get(this)!;
    const size = b.byteLength;
    const rel = (n: number | undefined, d: number) => (n === undefined ? d : n < 0 ? Math.max(size + n, 0) : Math.min(n, size));
    const from = rel(start === undefined ? undefined : Math.trunc(Number(start)) || 0, 0);
    const to = rel(end === undefined ? undefined : Math.trunc(Number(end)) || 0, size);
    const out = new Blob([], { type: contentType });
    bytesOf.set(out, b.slice(from, Math.max(from, to)));
    return out;
  }
  async text(): Promise<string> {
    return utf8Decode(bytesOf.get(this)!);
  }
  async arrayBuffer(): Promise<ArrayBuffer> {
    return bytesOf.get(this)!.slice().buffer;
  }
  async bytes(): Promise<Uint8Array> {
    return bytesOf.get(this)!.slice();
  }
  stream(): ReadableStream<Uint8Array> {
    return readableFromBytes(bytesOf.get(this)!.slice());
  }
  get [Symbol.toStringTag](): string {
    return 'Blob';
  }
}

/** The bytes behind a Blob, without copying (internal use). */
export function blobBytes(b: Blob): Uint8Array {
  return bytesOf.get(b)!;
}

export class File extends Blob {
  #name: string;
  #lastModified: number;
  constructor(parts: Iterable<BlobPart>, name: string, options: { type?: string; endings?: 'transparent' | 'native'; lastModified?: number } = {}) {
    if (arguments.length < 2) throw new TypeError("Failed to construct 'File': 2 arguments required");
    super(parts, options);
    this.#name = String(name);
    this.#lastModified = options?.lastModified === undefined ? Date.now() : Number(options.lastModified);
  }
  get name(): string {
    return this.#name;
  }
  get lastModified(): number {
    return this.#lastModified;
  }
  get [Symbol.toStringTag](): string {
    return 'File';
  }
}
