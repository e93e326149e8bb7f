/**
 * crypto: getRandomValues and randomUUID from host entropy (buffered, 4 kB at a time), and a
 * SubtleCrypto with HMAC (SHA-1/256/384/512: importKey, generateKey, exportKey, sign, verify) and
 * digest (SHA-1/256/384/512). The hashing runs on the host over plain byte copies; verify compares
 * in constant time there. Also crypto.subtle.timingSafeEqual (as on Workers).
 */
import { callHost, hostFns } from '../bridge.ts';
import { DOMException } from './events.ts';
import { atob, btoa } from './base64.ts';

let pool: Uint8Array = new Uint8Array(0);
let poolAt = 0;

/**
 * Fresh host entropy handed in with an invocation on isolated-vm's threads, where a call to the host
 * costs a thread hop (inline, none is handed in: the pool is topped up by a cheap direct call).
 */
export function addEntropy(bytes: Uint8Array): void {
  if (!bytes.byteLength) return;
  pool = bytes;
  poolAt = 0;
}

function randomBytes(n: number): Uint8Array {
  if (poolAt + n > pool.length) {
    pool = hostFns().random(Math.max(4096, n));
    poolAt = 0;
  }
  const out = pool.subarray(poolAt, poolAt + n);
  poolAt += n;
  return out;
}

const integerArrays = [
  'Int8Array',
  'Uint8Array',
  'Uint8ClampedArray',
  'Int16Array',
  'Uint16Array',
  'Int32Array',
  'Uint32Array',
  'BigInt64Array',
  'BigUint64Array',
];

function getRandomValues<T extends ArrayBufferView | null>(array: T): T {
  if (!ArrayBuffer.isView(array) || !integerArrays.includes(Object.prototype.toString.call(array).slice(8, -1))) {
    throw new DOMException("Failed to execute 'getRandomValues' on 'Crypto': The provided ArrayBufferView is not an integer array type", 'TypeMismatchError');
  }
  if (array.byteLength > 65536)
    throw new DOMException(
      `Failed to execute 'getRandomValues' on 'Crypto': The ArrayBufferView's byte length (${array.byteLength}) exceeds the number of bytes of entropy available via this API (65536).`,
      'QuotaExceededError',
    );
  new Uint8Array(array.buffer, array.byteOffset, array.byteLength).set(randomBytes(array.byteLength));
  return array;
}

function randomUUID(): string {
  const b = Uint8Array.from(randomBytes(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

const hashes: Record<string, { name: string; block: number }> = {
  'SHA-1': { name: 'SHA-1', block: 512 },
  'SHA-256': { name: 'SHA-256', block: 512 },
  'SHA-384': { name: 'SHA-384', block: 1024 },
  'SHA-512': { name: 'SHA-512', block: 1024 },
};

function hashName(alg: unknown): string {
  const name = typeof alg === 'string' ? alg : (alg as { name?: unknown })?.name;
  const h = hashes[String(name).toUpperCase()];
  if (!h)
    throw new DOMException(`Unrecognized or unsupported hash algorithm: ${String(name)} (supported: SHA-1, SHA-256, SHA-384, SHA-512)`, 'NotSupportedError');
  return h.name;
}

function bufferSource(data: unknown, what: string): Uint8Array {
  if (data instanceof ArrayBuffer) return new Uint8Array(data.slice(0));
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength));
  throw new TypeError(`${what} must be an ArrayBuffer or an ArrayBufferView`);
}

const keyBytes = new WeakMap<CryptoKey, Uint8Array>();
let makingKey = false;

export class CryptoKey {
  readonly type = 'secret';
  readonly extractable: boolean;
  readonly algorithm: { name: 'HMAC'; hash: { name: string }; length: number };
  readonly usages: string[];
  constructor(extractable: boolean, algorithm: CryptoKey['algorithm'], usages: string[]) {
    if (!makingKey) throw new TypeError('Illegal constructor');
    this.extractable = extractable;
    this.algorithm = algorithm;
    this.usages = usages;
  }
  get [Symbol.toStringTag](): string {
    return 'CryptoKey';
  }
}

function newKey(raw: Uint8Array, hash: string, extractable: boolean, usages: string[], length?: number): CryptoKey {
  for (const u of usages) if (u !== 'sign' && u !== 'verify') throw new DOMException(`Cannot create a key using the specified key usages: ${u}`, 'SyntaxError');
  if (usages.length === 0) throw new DOMException('Usages cannot be empty when creating a key.', 'SyntaxError');
  if (raw.byteLength === 0) throw new DOMException('HMAC key data must not be empty', 'DataError');
  makingKey = true;
  try {
    const key = new CryptoKey(!!extractable, { name: 'HMAC', hash: { name: hash }, length: length ?? raw.byteLength * 8 }, [...usages]);
    keyBytes.set(key, raw);
    return key;
  } finally {
    makingKey = false;
  }
}

function hmacKey(key: unknown, usage: string): { raw: Uint8Array; hash: string } {
  if (!(key instanceof CryptoKey)) throw new TypeError('key is not a CryptoKey');
  if (!key.usages.includes(usage)) throw new DOMException(`key does not allow '${usage}'`, 'InvalidAccessError');
  return { raw: keyBytes.get(key)!, hash: key.algorithm.hash.name };
}

function checkHmac(algorithm: unknown): void {
  const name = typeof algorithm === 'string' ? algorithm : (algorithm as { name?: unknown })?.name;
  if (String(name).toUpperCase() !== 'HMAC')
    throw new DOMException(`Unrecognized or unsupported algorithm: ${String(name)} (supported: HMAC; digest: SHA-1/256/384/512)`, 'NotSupportedError');
}

const b64url = {
  encode: (b: Uint8Array) =>
    btoa(String.fromCharCode(...b))
      .replace(/\+/g, '-')
      .replace(/\//g, '_')
      .replace(/=+$/, ''),
  decode: (s: string) => Uint8Array.from(atob(s.replace(/-/g, '+').replace(/_/g, '/')), (c) => c.charCodeAt(0)),
};

export const subtle = {
  async digest(algorithm: unknown, data: unknown): Promise<ArrayBuffer> {
    const hash = hashName(algorithm);
    const bytes = await callHost<Uint8Array>('digest', { hash, data: bufferSource(data, 'data') });
    return bytes.slice().buffer;
  },
  async importKey(format: string, keyData: unknown, algorithm: any, extractable: boolean, usages: string[]): Promise<CryptoKey> {
    checkHmac(algorithm);
    const hash = hashName(algorithm.hash);
    let raw: Uint8Array;
    if (format === 'raw') raw = bufferSource(keyData, 'keyData');
    else if (format === 'jwk') {
      const jwk = keyData as { kty?: string; k?: string };
      if (jwk?.kty !== 'oct' || typeof jwk.k !== 'string') throw new DOMException('JWK must be of type oct with a k member', 'DataError');
      raw = b64url.decode(jwk.k);
    } else throw new DOMException(`Unsupported key format: ${format} (raw or jwk)`, 'NotSupportedError');
    return newKey(raw, hash, extractable, usages, algorithm.length);
  },
  async generateKey(algorithm: any, extractable: boolean, usages: string[]): Promise<CryptoKey> {
    checkHmac(algorithm);
    const hash = hashName(algorithm.hash);
    const bits = algorithm.length ?? hashes[hash].block;
    return newKey(Uint8Array.from(randomBytes(Math.ceil(bits / 8))), hash, extractable, usages, bits);
  },
  async exportKey(format: string, key: CryptoKey): Promise<ArrayBuffer | object> {
    if (!(key instanceof CryptoKey)) throw new TypeError('key is not a CryptoKey');
    if (!key.extractable) throw new DOMException('key is not extractable', 'InvalidAccessError');
    const raw = keyBytes.get(key)!;
    if (format === 'raw') return raw.slice().buffer;
    if (format === 'jwk') return { kty: 'oct', k: b64url.encode(raw), alg: `HS${key.algorithm.hash.name.slice(4)}`, key_ops: [...key.usages], ext: true };
    throw new DOMException(`Unsupported key format: ${format} (raw or jwk)`, 'NotSupportedError');
  },
  async sign(algorithm: unknown, key: CryptoKey, data: unknown): Promise<ArrayBuffer> {
    checkHmac(algorithm);
    const k = hmacKey(key, 'sign');
    const mac = await callHost<Uint8Array>('hmac', { hash: k.hash, key: k.raw, data: bufferSource(data, 'data') });
    return mac.slice().buffer;
  },
  async verify(algorithm: unknown, key: CryptoKey, signature: unknown, data: unknown): Promise<boolean> {
    checkHmac(algorithm);
    const k = hmacKey(key, 'verify');
    return callHost<boolean>('hmac-verify', { hash: k.hash, key: k.raw, data: bufferSource(data, 'data'), signature: bufferSource(signature, 'signature') });
  },
  /** Constant-time comparison of two equal-length buffers (a Workers extension). */
  timingSafeEqual(a: unknown, b: unknown): boolean {
    const x = bufferSource(a, 'a');
    const y = bufferSource(b, 'b');
    if (x.byteLength !== y.byteLength) throw new TypeError('Input buffers must have the same byte length');
    let diff = 0;
    for (let i = 0; i < x.byteLength; i++) diff |= x[i] ^ y[i];
    return diff === 0;
  },
};

export const crypto = {
  getRandomValues,
  randomUUID,
  subtle,
};
