/** The guest's types for @exodus/bytes/multi-byte.js (the package's reference Node's: see utf8.d.ts). */

/** A decoder of a multi-byte legacy encoding (Shift_JIS, GBK, Big5, EUC-*...). */
export function createMultibyteDecoder(encoding: string, loose?: boolean): (bytes: Uint8Array, stream?: boolean) => string;
