/** The Body mixin shared by Request and Response: extract a body from any BodyInit, read it once. */
import { Blob, blobBytes } from './blob.ts';
import { utf8Decode, utf8DecodeKeepBOM, utf8Encode } from './encoding.ts';
import { FormData, decodeMultipart, decodeUrlEncoded, encodeMultipart } from './formdata.ts';
import { isReadableStream, readAll, streamsLib, type ReadableStream } from './streams.ts';
import { slot } from './slot.ts';
import { URLSearchParams } from './url.ts';

export type BodyInit = string | ArrayBuffer | ArrayBufferView | Blob | FormData | URLSearchParams | ReadableStream<Uint8Array>;

export interface BodyState {
  bytes: Uint8Array | null;
  stream: ReadableStream<Uint8Array> | null;
  used: boolean;
  /** The string the bytes were made from, while they are unread: it leaves the isolate as is. */
  text?: string;
}

export interface Extracted {
  body: BodyState | null;
  contentType: string | null;
}

export function extractBody(init: unknown): Extracted {
  if (init === null || init === undefined) return { body: null, contentType: null };
  const state = (bytes: Uint8Array | null, stream: ReadableStream<Uint8Array> | null = null): BodyState => ({ bytes, stream, used: false });
  if (typeof init === 'string') return { body: { ...state(utf8Encode(init)), text: init }, contentType: 'text/plain;charset=UTF-8' };
  if (init instanceof URLSearchParams) return { body: state(utf8Encode(init.toString())), contentType: 'application/x-www-form-urlencoded;charset=UTF-8' };
  if (init instanceof ArrayBuffer) return { body: state(new Uint8Array(init.slice(0))), contentType: null };
  if (ArrayBuffer.isView(init))
    return { body: state(new Uint8Array(init.buffer.slice(init.byteOffset, init.byteOffset + init.byteLength))), contentType: null };
  if (init instanceof Blob) return { body: state(blobBytes(init)), contentType: init.type || null };
  if (init instanceof FormData) {
    const m = encodeMultipart(init);
    return { body: state(m.body), contentType: m.contentType };
  }
  if (isReadableStream(init)) {
    if (init.locked) throw new TypeError('the body stream is locked');
    return { body: state(null, init), contentType: null };
  }
  return { body: state(utf8Encode(String(init))), contentType: 'text/plain;charset=UTF-8' };
}

const bodies = slot<BodyState | null>();

export function setBody(owner: object, body: BodyState | null): void {
  bodies.set(owner, body);
}
export function getBody(owner: object): BodyState | null {
  return bodies.get(owner) ?? null;
}

/** The ReadableStream view of a body (made on first access; reading it marks the body used). */
export function bodyStream(owner: object): ReadableStream<Uint8Array> | null {
  const b = getBody(owner);
  if (!b) return null;
  if (!b.stream) {
    const bytes = b.bytes!;
    const { ReadableStream } = streamsLib();
    b.stream = new ReadableStream<Uint8Array>(
      {
        type: 'bytes',
        pull(controller) {
          b.used = true;
          if (bytes.byteLength) controller.enqueue(bytes.slice());
          controller.close();
        },
      },
      { highWaterMark: 0 },
    );
    b.bytes = null;
    b.text = undefined;
  }
  return b.stream;
}

export function bodyUsed(owner: object): boolean {
  return getBody(owner)?.used ?? false;
}

/**
 * The body as the string it was made from, once, when it was made from one and is unread (an
 * answer's usual body): copying a string out of the isolate costs a third of copying its bytes.
 * Undefined otherwise, the body untouched.
 */
export function consumeText(owner: object, limit = Infinity): string | undefined {
  const b = getBody(owner);
  if (!b || b.used || b.stream || b.text === undefined || !b.bytes) return undefined;
  if (b.bytes.byteLength > limit) throw new TypeError(`body is larger than ${limit} bytes`);
  b.used = true;
  return b.text;
}

/** Take the whole body as bytes, once. */
export async function consume(owner: object, limit = Infinity): Promise<Uint8Array> {
  const b = getBody(owner);
  if (!b) return new Uint8Array(0);
  if (b.used) throw new TypeError('Body has already been used');
  if (b.stream?.locked) throw new TypeError('Body stream is locked');
  b.used = true;
  if (b.bytes) {
    if (b.bytes.byteLength > limit) throw new TypeError(`body is larger than ${limit} bytes`);
    return b.bytes;
  }
  return readAll(b.stream!, limit);
}

/** Split a body for clone(): bytes are shared (never mutated), streams are teed. */
export function cloneBody(owner: object): BodyState | null {
  const b = getBody(owner);
  if (!b) return null;
  if (b.used) throw new TypeError('cannot clone: Body has already been used');
  if (b.bytes) return { bytes: b.bytes, stream: null, used: false };
  const [a, c] = b.stream!.tee();
  b.stream = a;
  return { bytes: null, stream: c, used: false };
}

export function mimeEssence(contentType: string | null): string {
  return (contentType ?? '').split(';')[0].trim().toLowerCase();
}

/** Methods of the Body mixin, installed on Request.prototype and Response.prototype. */
export const bodyMethods = {
  async arrayBuffer(this: { headers: { get(n: string): string | null } }): Promise<ArrayBuffer> {
    return (await consume(this)).slice().buffer;
  },
  async bytes(this: object): Promise<Uint8Array> {
    return (await consume(this)).slice();
  },
  async text(this: object): Promise<string> {
    return utf8Decode(await consume(this));
  },
  async json(this: object): Promise<unknown> {
    return JSON.parse(utf8Decode(await consume(this)));
  },
  async blob(this: { headers: { get(n: string): string | null } }): Promise<Blob> {
    const bytes = await consume(this);
    return new Blob([bytes], { type: this.headers.get('content-type') ?? '' });
  },
  async formData(this: { headers: { get(n: string): string | null } }): Promise<FormData> {
    const type = this.headers.get('content-type');
    const essence = mimeEssence(type);
    const bytes = await consume(this);
    if (essence === 'multipart/form-data') return decodeMultipart(bytes, type!);
    // The urlencoded parser works on the bytes: a leading BOM is data here, not a signature.
    if (essence === 'application/x-www-form-urlencoded') return decodeUrlEncoded(utf8DecodeKeepBOM(bytes));
    throw new TypeError(`cannot parse a body of type ${JSON.stringify(type ?? '')} as FormData`);
  },
};

/**
 * What installBodyMixin adds to a prototype: Request and Response declare it by merging this
 * interface into their classes (`interface Request extends Body {}`).
 */
export interface Body extends BodyMethods {
  readonly body: ReadableStream<Uint8Array> | null;
  readonly bodyUsed: boolean;
}
type BodyMethods = { [K in keyof typeof bodyMethods]: OmitThisParameter<(typeof bodyMethods)[K]> };

export function installBodyMixin(proto: object): void {
  for (const [name, fn] of Object.entries(bodyMethods)) {
    Object.defineProperty(proto, name, { value: fn, writable: true, configurable: true, enumerable: true });
  }
  Object.defineProperty(proto, 'body', {
    get(this: object) {
      return bodyStream(this);
    },
    configurable: true,
    enumerable: true,
  });
  Object.defineProperty(proto, 'bodyUsed', {
    get(this: object) {
      return bodyUsed(this);
    },
    configurable: true,
    enumerable: true,
  });
}
