/** atob / btoa per the HTML standard (forgiving base64). */
import { DOMException } from './events.ts';

const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const lookup = new Int16Array(128).fill(-1);
for (let i = 0; i < alphabet.length; i++) lookup[alphabet.charCodeAt(i)] = i;

export function btoa(data: unknown): string {
  if (arguments.length === 0) throw new TypeError("Failed to execute 'btoa': 1 argument required");
  const s = String(data);
  let out = '';
  for (let i = 0; i < s.length; i += 3) {
    const a = s.charCodeAt(i);
    const b = i + 1 < s.length ? s.charCodeAt(i + 1) : 0;
    const c = i + 2 < s.length ? s.charCodeAt(i + 2) : 0;
    if (a > 255 || b > 255 || c > 255)
      throw new DOMException('The string to be encoded contains characters outside of the Latin1 range.', 'InvalidCharacterError');
    const n = (a << 16) | (b << 8) | c;
    out += alphabet[(n >> 18) & 63] + alphabet[(n >> 12) & 63];
    out += i + 1 < s.length ? alphabet[(n >> 6) & 63] : '=';
    out += i + 2 < s.length ? alphabet[n & 63] : '=';
  }
  return out;
}

export function atob(data: unknown): string {
  if (arguments.length === 0) throw new TypeError("Failed to execute 'atob': 1 argument required");
  let s = String(data).replace(/[\t\n\f\r ]/g, '');
  if (s.length % 4 === 0) s = s.replace(/==?$/, '');
  if (s.length % 4 === 1 || /[^A-Za-z0-9+/]/.test(s)) {
    throw new DOMException('The string to be decoded is not correctly encoded.', 'InvalidCharacterError');
  }
  let out = '';
  let buffer = 0;
  let bits = 0;
  for (let i = 0; i < s.length; i++) {
    buffer = (buffer << 6) | lookup[s.charCodeAt(i)];
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += String.fromCharCode((buffer >> bits) & 255);
    }
  }
  return out;
}
