/**
 * Types of the package code the guest library bundles that ships none, as far as the guest uses
 * it: whatwg-url, tr46, and the modules of @exodus/bytes that its package does not export (reached
 * by relative paths into node_modules, matched here by pattern). The exported modules of
 * @exodus/bytes are typed in exodus-bytes/ instead (see tsconfig.guest.json).
 */

declare module 'whatwg-url' {
  export class URL {
    constructor(url: string | URL, base?: string | URL);
    static canParse(url: string | URL, base?: string | URL): boolean;
    static parse(url: string | URL, base?: string | URL): URL | null;
    href: string;
    readonly origin: string;
    protocol: string;
    username: string;
    password: string;
    host: string;
    hostname: string;
    port: string;
    pathname: string;
    search: string;
    readonly searchParams: URLSearchParams;
    hash: string;
    toString(): string;
    toJSON(): string;
  }

  export class URLSearchParams {
    constructor(init?: string | Record<string, string> | Iterable<readonly [string, string]> | URLSearchParams);
    readonly size: number;
    append(name: string, value: string): void;
    delete(name: string, value?: string): void;
    get(name: string): string | null;
    getAll(name: string): string[];
    has(name: string, value?: string): boolean;
    set(name: string, value: string): void;
    sort(): void;
    toString(): string;
    forEach(callback: (value: string, name: string, params: URLSearchParams) => void, thisArg?: unknown): void;
    keys(): IterableIterator<string>;
    values(): IterableIterator<string>;
    entries(): IterableIterator<[string, string]>;
    [Symbol.iterator](): IterableIterator<[string, string]>;
  }
}

declare module '*/@exodus/bytes/fallback/multi-byte.js' {
  export function multibyteEncoder(encoding: string, onError?: unknown): (string: string) => Uint8Array;
}

declare module '*/@exodus/bytes/fallback/percent.js' {
  /** A function percent-encoding UTF-8 (or legacy-encoded) bytes with the given percent-encode set. */
  export function percentEncoder(set: string, spaceAsPlus?: boolean): (bytes: Uint8Array) => string;
}

declare module '*/@exodus/bytes/fallback/encoding.js' {
  /** Install the multi-byte legacy encodings (the guest loads them lazily; see web/encoding.ts). */
  export function setMultibyte(
    createDecoder: (encoding: string, loose?: boolean) => (bytes: Uint8Array, stream?: boolean) => string,
    createEncoder: (encoding: string, onError?: unknown) => (string: string) => Uint8Array,
  ): void;

  export class TextEncoder {
    readonly encoding: 'utf-8';
    encode(input?: string): Uint8Array<ArrayBuffer>;
    encodeInto(source: string, destination: Uint8Array): { read: number; written: number };
  }

  export class TextDecoder {
    constructor(label?: string, options?: { fatal?: boolean; ignoreBOM?: boolean });
    readonly encoding: string;
    readonly fatal: boolean;
    readonly ignoreBOM: boolean;
    decode(input?: ArrayBuffer | ArrayBufferView, options?: { stream?: boolean }): string;
  }
}

declare module '*/tr46/index.js' {
  interface Options {
    checkHyphens?: boolean;
    checkBidi?: boolean;
    checkJoiners?: boolean;
    useSTD3ASCIIRules?: boolean;
    verifyDNSLength?: boolean;
    transitionalProcessing?: boolean;
    ignoreInvalidPunycode?: boolean;
  }
  export function toASCII(domain: string, options?: Options): string | null;
  export function toUnicode(domain: string, options?: Omit<Options, 'verifyDNSLength'>): { domain: string; error: boolean };
}
