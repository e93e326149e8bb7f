/** Stand-in for whatwg-url's lib/encoding.js, which needs TextEncoder as a global at load time. */
import { utf8fromStringLoose, utf8toStringLoose } from '@exodus/bytes/utf8.js';

export const utf8Encode = (s: string): Uint8Array => utf8fromStringLoose(s);
export const utf8DecodeWithoutBOM = (b: Uint8Array): string => utf8toStringLoose(b);
