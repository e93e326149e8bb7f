/**
 * Web Streams (web-streams-polyfill, the spec's reference implementation). Evaluated in the isolate
 * only when first used: most handlers read bodies with text()/json() and never touch a stream.
 */
type Ponyfill = typeof import('web-streams-polyfill');

/** The guest's ReadableStream (the global one is the library's, installed on first use by index.ts). */
export type ReadableStream<R = unknown> = import('web-streams-polyfill').ReadableStream<R>;

// esbuild turns this require into a lazily run module initialiser (the isolate has no require).
declare const require: (id: 'web-streams-polyfill') => Ponyfill;

let streams: Ponyfill | undefined;

export function streamsLib(): Ponyfill {
  streams ??= require('web-streams-polyfill');
  return streams;
}

/** True for a ReadableStream (without loading the library when none can exist yet). */
export function isReadableStream(x: unknown): x is ReadableStream<Uint8Array> {
  return streams !== undefined && x instanceof streams.ReadableStream;
}

export function readableFromBytes(bytes: Uint8Array): ReadableStream<Uint8Array> {
  const { ReadableStream } = streamsLib();
  return new ReadableStream<Uint8Array>({
    type: 'bytes',
    start(controller) {
      if (bytes.byteLength) controller.enqueue(bytes);
      controller.close();
    },
  });
}

/** Read a byte stream to the end; throws a TypeError past `limit` bytes. */
export async function readAll(stream: ReadableStream<Uint8Array>, limit = Infinity): Promise<Uint8Array> {
  const reader = stream.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (!(value instanceof Uint8Array)) throw new TypeError('a body stream must yield Uint8Array chunks');
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => {});
      throw new TypeError(`body is larger than ${limit} bytes`);
    }
    chunks.push(value);
  }
  if (chunks.length === 1) return chunks[0];
  const out = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}
