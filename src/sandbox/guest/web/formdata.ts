/** FormData, and its two wire forms: multipart/form-data and application/x-www-form-urlencoded. */
import { Blob, File, blobBytes, concatBytes } from './blob.ts';
import { utf8Decode, utf8Encode } from './encoding.ts';
import { URLSearchParams } from './url.ts';
import { contentTypeParam } from '../../../lib/header-params.ts';
import { parseMultipart } from '../../../lib/multipart.ts';

type Entry = [string, string | File];
const entriesOf = new WeakMap<FormData, Entry[]>();

function toEntryValue(value: unknown, filename?: unknown): string | File {
  if (value instanceof Blob) {
    if (!(value instanceof File) || filename !== undefined) {
      const name = filename !== undefined ? String(filename) : value instanceof File ? value.name : 'blob';
      return new File([value], name, { type: value.type, lastModified: value instanceof File ? value.lastModified : undefined });
    }
    return value;
  }
  return String(value);
}

export class FormData {
  constructor(form?: unknown) {
    if (form !== undefined) throw new TypeError("Failed to construct 'FormData': there are no HTML forms in a server runtime");
    entriesOf.set(this, []);
  }
  append(name: string, value: unknown, filename?: string): void {
    if (arguments.length < 2) throw new TypeError("Failed to execute 'append' on 'FormData': 2 arguments required");
    entriesOf.get(this)!.push([String(name), toEntryValue(value, filename)]);
  }
  delete(name: string): void {
    const n = String(name);
    entriesOf.set(
      this,
      entriesOf.get(this)!.filter(([k]) => k !== n),
    );
  }
  get(name: string): string | File | null {
    const n = String(name);
    return entriesOf.get(this)!.find(([k]) => k === n)?.[1] ?? null;
  }
  getAll(name: string): Array<string | File> {
    const n = String(name);
    return entriesOf
      .get(this)!
      .filter(([k]) => k === n)
      .map(([, v]) => v);
  }
  has(name: string): boolean {
    const n = String(name);
    return entriesOf.get(this)!.some(([k]) => k === n);
  }
  set(name: string, value: unknown, filename?: string): void {
    if (arguments.length < 2) throw new TypeError("Failed to execute 'set' on 'FormData': 2 arguments required");
    const n = String(name);
    const list = entriesOf.get(this)!;
    const entry: Entry = [n, toEntryValue(value, filename)];
    const i = list.findIndex(([k]) => k === n);
    if (i < 0) list.push(entry);
    else entriesOf.set(this, [...list.slice(0, i), entry, ...list.slice(i + 1).filter(([k]) => k !== n)]);
  }
  *entries(): IterableIterator<[string, string | File]> {
    const list = entriesOf.get(this)!;
    for (let i = 0; i < list.length; i++) yield [list[i][0], list[i][1]];
  }
  *keys(): IterableIterator<string> {
    for (const [k] of this.entries()) yield k;
  }
  *values(): IterableIterator<string | File> {
    for (const [, v] of this.entries()) yield v;
  }
  forEach(cb: (value: string | File, key: string, parent: FormData) => void, thisArg?: unknown): void {
    for (const [k, v] of this.entries()) cb.call(thisArg, v, k, this);
  }
  [Symbol.iterator](): IterableIterator<[string, string | File]> {
    return this.entries();
  }
  get [Symbol.toStringTag](): string {
    return 'FormData';
  }
}

const escapeName = (s: string) =>
  s
    .replace(/\r\n|\r|\n/g, '\r\n')
    .replace(/\n/g, '%0A')
    .replace(/\r/g, '%0D')
    .replace(/"/g, '%22');

/** Serialise as multipart/form-data; returns the bytes and the Content-Type with its boundary. */
export function encodeMultipart(form: FormData): { body: Uint8Array; contentType: string } {
  const boundary = `----SwitchyardFormBoundary${Math.random().toString(36).slice(2)}${Math.random().toString(36).slice(2)}`;
  const chunks: Uint8Array[] = [];
  for (const [name, value] of form) {
    let head = `--${boundary}\r\nContent-Disposition: form-data; name="${escapeName(name)}"`;
    if (typeof value === 'string') {
      chunks.push(utf8Encode(`${head}\r\n\r\n${value.replace(/\r(?!\n)|(?<!\r)\n/g, '\r\n')}\r\n`));
    } else {
      head += `; filename="${escapeName(value.name)}"\r\nContent-Type: ${value.type || 'application/octet-stream'}\r\n\r\n`;
      chunks.push(utf8Encode(head), blobBytes(value), utf8Encode('\r\n'));
    }
  }
  chunks.push(utf8Encode(`--${boundary}--\r\n`));
  return { body: concatBytes(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}

/** Parse a multipart/form-data body (src/lib/multipart.ts: RFC 2046); throws TypeError when it is malformed. */
export function decodeMultipart(body: Uint8Array, contentType: string): FormData {
  const boundary = contentTypeParam(contentType, 'boundary');
  if (!boundary) throw new TypeError('multipart/form-data body has no boundary in its Content-Type');
  const form = new FormData();
  for (const part of parseMultipart(body, boundary, utf8Decode)) {
    if (part.filename !== undefined) form.append(part.name, new File([part.content], part.filename, { type: part.type }));
    else form.append(part.name, utf8Decode(part.content));
  }
  return form;
}

/** Parse application/x-www-form-urlencoded text into a FormData. */
export function decodeUrlEncoded(text: string): FormData {
  const form = new FormData();
  for (const [k, v] of new URLSearchParams(text)) form.append(k, v);
  return form;
}
