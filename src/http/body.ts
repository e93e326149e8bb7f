/** Request bodies for the management API and the runtime: size caps and errors that say what is wrong. */
import type { IncomingMessage } from 'node:http';
import { SwitchyardError } from '../errors.ts';
import { MAX_JSON_DEPTH, nestedDeeperThan } from '../lib/json-depth.ts';

/**
 * Hands each chunk of a request's body to `take`, which throws to stop (a limit passed): the rest is
 * left unread (the caller's 413 closes the connection). A client that goes away mid-body is
 * clientGone. From the Node request under the server's Request when its body is untouched: its
 * web stream (Readable.toWeb) cost a single-event ingest about a tenth of its CPU, measured.
 */
async function eachChunk(req: Request, take: (chunk: Uint8Array) => void): Promise<void> {
  if (req.method === 'GET' || req.method === 'HEAD') return;
  const node = untouchedNodeRequest(req);
  if (node) {
    // Gone before the reader started (the handler awaited something first): a destroyed stream
    // emits nothing more, and a reader left waiting would never answer.
    if (node.destroyed) throw clientGone();
    return eachNodeChunk(node, take);
  }
  if (!req.body) return;
  const reader = req.body.getReader();
  for (;;) {
    let read: Awaited<ReturnType<typeof reader.read>>;
    try {
      read = await reader.read();
    } catch {
      throw clientGone();
    }
    if (read.done) return;
    try {
      take(read.value);
    } catch (e) {
      await reader.cancel().catch(() => {});
      throw e;
    }
  }
}

/** The Node request a srvx Request wraps (HTTP/2's compat request too), unless its body was already asked for (a web stream made of it) or read. */
function untouchedNodeRequest(req: Request): IncomingMessage | undefined {
  const node = (req as { runtime?: { node?: { req?: IncomingMessage } } }).runtime?.node?.req;
  if (!node || req.bodyUsed || node.readableDidRead || node.listenerCount('data') > 0 || node.readableEnded) return undefined;
  return node;
}

function eachNodeChunk(node: IncomingMessage, take: (chunk: Uint8Array) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const settle = (error?: unknown) => {
      node.off('data', onData).off('end', onEnd).off('error', onGone).off('close', onClose);
      if (error === undefined) resolve();
      else reject(error);
    };
    const onData = (chunk: Buffer) => {
      try {
        take(chunk);
      } catch (e) {
        node.pause();
        settle(e);
      }
    };
    // HTTP/2's request ends normally (complete) when the client cancels its stream: `aborted` tells a cut body from a whole one.
    const onEnd = () => settle((node as { aborted?: boolean }).aborted ? clientGone() : undefined);
    const onGone = () => settle(clientGone());
    const onClose = () => {
      if (!node.complete) settle(clientGone());
    };
    node.on('data', onData).on('end', onEnd).on('error', onGone).on('close', onClose);
  });
}

/** Read a request body up to `limit` bytes (413 beyond), whatever Content-Length claims. */
export async function readBodyLimited(req: Request, limit: number): Promise<Uint8Array> {
  const declared = Number(req.headers.get('content-length') ?? NaN);
  if (Number.isFinite(declared) && declared > limit) throw bodyTooLarge(limit);
  const chunks: Uint8Array[] = [];
  let size = 0;
  await eachChunk(req, (chunk) => {
    size += chunk.byteLength;
    if (size > limit) throw bodyTooLarge(limit);
    chunks.push(chunk);
  });
  // Always a copy of its own: a Node chunk may be a view of a shared pool, and a body can be handed
  // on whole (its .buffer) to integration code.
  const out = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

/**
 * The client closed its connection before its body ended. Said as the client's doing: the socket's
 * own error (ECONNRESET) would read as the store's (store/health.ts storageCode) and mark it failing.
 */
export function clientGone(): SwitchyardError {
  return new SwitchyardError('bad_request', 'the client closed the connection before the request body ended');
}

export function bodyTooLarge(limit: number): SwitchyardError {
  return new SwitchyardError('payload_too_large', `the request body is larger than ${limit} bytes`, {
    hint: 'raise server.body_limit or sandbox.request_body in config.yaml if this is expected',
    // The unread rest of the body stays in the connection: close it, or a client reusing it sees its next request reset.
    headers: { connection: 'close' },
  });
}

export async function readJson<T = Record<string, unknown>>(req: Request, limit: number, opts: { optional?: boolean } = {}): Promise<T> {
  const bytes = await readBodyLimited(req, limit);
  if (!bytes.byteLength) {
    if (opts.optional) return {} as T;
    throw new SwitchyardError('bad_request', 'the request needs a JSON body');
  }
  const v = parseJson(req, bytes, false);
  // What is stored or handed to integration code must copy into the sandbox (see MAX_JSON_DEPTH).
  if (nestedDeeperThan(v, MAX_JSON_DEPTH))
    throw new SwitchyardError('bad_request', `the body is nested deeper than ${MAX_JSON_DEPTH} levels`, { hint: 'flatten the data' });
  return v as T;
}

function parseJson(req: Request, bytes: Uint8Array, arrays: boolean): Record<string, unknown> | unknown[] {
  const type = req.headers.get('content-type') ?? '';
  if (type && !/^application\/(.+\+)?json\b/i.test(type))
    throw new SwitchyardError('unsupported_media_type', `expected Content-Type: application/json, got "${type}"`);
  let v: unknown;
  try {
    v = JSON.parse(new TextDecoder().decode(bytes));
    if (!v || typeof v !== 'object' || (Array.isArray(v) && !arrays))
      throw new Error(arrays ? 'the body must be a JSON object or an array of them' : 'the body must be a JSON object');
  } catch (e) {
    throw new SwitchyardError('bad_request', `the body is not a valid JSON ${arrays ? 'object or array' : 'object'}: ${(e as Error).message}`);
  }
  return v as Record<string, unknown> | unknown[];
}

/** A size cap and the config key that sets it (named in the 413). */
export interface BodyLimit {
  bytes: number;
  key: string;
}

/**
 * The rest of a body refused unread stays in the connection: `Connection: close` ends it after the
 * 413, or a client that reuses it (fetch's keep-alive pool) would see its next request reset.
 */
const CLOSE = { connection: 'close' };

function tooLarge(what: string, limit: BodyLimit, hint: string): SwitchyardError {
  return new SwitchyardError('payload_too_large', `${what} is larger than ${limit.key} (${limit.bytes} bytes)`, { where: limit.key, hint, headers: CLOSE });
}

/**
 * A JSON body that is one object (at most `object.bytes`) or, on a batch route, an array (at most
 * `array.bytes`): the first byte of the body says which cap applies, and the 413 names its key.
 * Arrays are not depth-checked here: their items are checked one by one by the caller.
 */
export async function readJsonObjectOrArray(req: Request, limits: { object: BodyLimit; array: BodyLimit }): Promise<Record<string, unknown> | unknown[]> {
  const { object, array } = limits;
  const objectTooLarge = () => tooLarge('the request body', object, `raise ${object.key} in config.yaml, or send a JSON array of events (up to ${array.key})`);
  const arrayTooLarge = () => tooLarge('the batch (a JSON array)', array, `send fewer events per request, or raise ${array.key} in config.yaml`);
  const declared = Number(req.headers.get('content-length') ?? NaN);
  const most = Math.max(object.bytes, array.bytes);
  if (Number.isFinite(declared) && declared > most)
    throw new SwitchyardError(
      'payload_too_large',
      `the request body (${declared} bytes) is larger than ${object.key} (${object.bytes} bytes) and ${array.key} (${array.bytes} bytes)`,
      {
        where: object.bytes >= array.bytes ? object.key : array.key,
        hint: `send fewer events per request, or raise ${array.key} (a JSON array) or ${object.key} (one object) in config.yaml`,
        headers: CLOSE,
      },
    );
  const chunks: Uint8Array[] = [];
  let size = 0;
  /** undefined until the first non-blank byte is seen. */
  let isArray: boolean | undefined;
  await eachChunk(req, (value) => {
    size += value.byteLength;
    chunks.push(value);
    if (isArray === undefined) {
      const first = value.findIndex((b) => b !== 0x20 && b !== 0x0a && b !== 0x0d && b !== 0x09);
      if (first >= 0) isArray = value[first] === 0x5b; // '['
    }
    const over =
      isArray === undefined
        ? size > most
        : size > (isArray ? array.bytes : object.bytes) || (Number.isFinite(declared) && declared > (isArray ? array.bytes : object.bytes));
    if (over) throw isArray ? arrayTooLarge() : objectTooLarge();
  });
  if (!size) throw new SwitchyardError('bad_request', 'the request needs a JSON body');
  const bytes = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size);
  const v = parseJson(req, bytes, true);
  if (!Array.isArray(v) && nestedDeeperThan(v, MAX_JSON_DEPTH))
    throw new SwitchyardError('bad_request', `the body is nested deeper than ${MAX_JSON_DEPTH} levels`, { hint: 'flatten the data' });
  return v;
}
