/**
 * TextEncoder / TextDecoder with every WHATWG encoding (from @exodus/bytes, pure JS). UTF-8,
 * UTF-16 and the single-byte encodings are in the core; the large multi-byte tables (Shift_JIS,
 * GBK, Big5, EUC-*) are loaded into the isolate the first time such a decoder is used.
 */
import { TextDecoder, TextEncoder, setMultibyte } from '../../../../node_modules/@exodus/bytes/fallback/encoding.js';
import { utf8fromStringLoose, utf8toStringLoose } from '@exodus/bytes/utf8.js';
import { loadExtra } from '../bridge.ts';

interface Encodings {
  createMultibyteDecoder(enc: string, loose?: boolean): (u: Uint8Array, stream?: boolean) => string;
  multibyteEncoder(enc: string, onError?: unknown): (s: string) => Uint8Array;
}

setMultibyte(
  (enc: string, loose?: boolean) => loadExtra<Encodings>('encodings').createMultibyteDecoder(enc, loose),
  (enc: string, onError?: unknown) => loadExtra<Encodings>('encodings').multibyteEncoder(enc, onError),
);

export { TextDecoder, TextEncoder };

/** UTF-8 bytes of a string (lone surrogates become U+FFFD), as fetch bodies need. */
export function utf8Encode(s: string): Uint8Array {
  return utf8fromStringLoose(s);
}

/** Decode UTF-8 with replacement, dropping a leading BOM (the "UTF-8 decode" of the Encoding spec). */
export function utf8Decode(bytes: Uint8Array): string {
  const b = bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? bytes.subarray(3) : bytes;
  return utf8toStringLoose(b);
}

/** Decode UTF-8 with replacement, keeping a leading BOM as U+FEFF. */
export function utf8DecodeKeepBOM(bytes: Uint8Array): string {
  return utf8toStringLoose(bytes);
}
