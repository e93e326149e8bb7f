/**
 * multipart/form-data bodies read as RFC 2046 (5.1.1) and RFC 7578 say, shared by the runtime
 * envelope (the host) and `request.formData()` in integration code (the guest library, so nothing
 * here needs Node or a global the isolate lacks):
 *
 * - A delimiter is CRLF, `--` and the boundary (the first may open the body), then `--` for the
 *   last one, or optional spaces and tabs and CRLF. The boundary text anywhere else (inside
 *   content, or after CRLF `--` but followed by other characters) is content: a boundary `x` and
 *   content holding `x`, `--x` or a line `--xy` read as sent.
 * - The CRLF before a delimiter belongs to the delimiter, not to the content before it.
 * - What precedes the first delimiter (the preamble) and follows the last (the epilogue) is ignored.
 * - A part's name and file name are its Content-Disposition's parameters (header-params.ts).
 *
 * Malformed input throws a TypeError saying what is wrong (what `formData()` throws).
 */
import { formDataDisposition } from './header-params.ts';

export interface MultipartPart {
  /** Header names in lower case. */
  headers: Record<string, string>;
  /** `name` of its Content-Disposition. */
  name: string;
  /** `filename` of its Content-Disposition, when it is a file. */
  filename?: string;
  /** Its Content-Type, or empty. */
  type: string;
  content: Uint8Array;
}

const CR = 0x0d;
const LF = 0x0a;
const DASH = 0x2d;

function indexOf(hay: Uint8Array, needle: Uint8Array, from: number): number {
  const first = needle[0];
  for (let i = hay.indexOf(first, from); i >= 0 && i <= hay.length - needle.length; i = hay.indexOf(first, i + 1)) {
    let j = 1;
    while (j < needle.length && hay[i + j] === needle[j]) j++;
    if (j === needle.length) return i;
  }
  return -1;
}

/**
 * Where the delimiter line starting at `at` (on its `--`) ends: the offset of the next part's first
 * byte, `'last'` for the closing delimiter, or -1 when this is no delimiter (content).
 */
function delimiterEnd(body: Uint8Array, at: number, dashBoundary: Uint8Array): number | 'last' {
  let i = at + dashBoundary.length;
  if (body[i] === DASH && body[i + 1] === DASH) return 'last';
  while (body[i] === 0x20 || body[i] === 0x09) i++; // transport padding
  return body[i] === CR && body[i + 1] === LF ? i + 2 : -1;
}

/** The next delimiter from `from`: where its CRLF starts (where content ends) and where it ends. */
function nextDelimiter(
  body: Uint8Array,
  from: number,
  dashBoundary: Uint8Array,
  crlfDashBoundary: Uint8Array,
): { start: number; end: number | 'last' } | undefined {
  for (let i = indexOf(body, crlfDashBoundary, from); i >= 0; i = indexOf(body, crlfDashBoundary, i + 1)) {
    const end = delimiterEnd(body, i + 2, dashBoundary);
    if (end !== -1) return { start: i, end };
  }
  return undefined;
}

/** The boundary's bytes; RFC 2046 boundaries are 1 to 70 printable ASCII characters. */
function boundaryBytes(boundary: string): Uint8Array {
  if (!/^[\x20-\x7e]{1,70}$/.test(boundary) || boundary.endsWith(' '))
    throw new TypeError('the multipart/form-data boundary must be 1 to 70 ASCII characters, not ending in a space');
  const out = new Uint8Array(boundary.length);
  for (let i = 0; i < boundary.length; i++) out[i] = boundary.charCodeAt(i);
  return out;
}

/** The parts of a multipart/form-data body. `decode` turns header bytes into text (UTF-8: names and file names may use it). */
export function parseMultipart(body: Uint8Array, boundary: string, decode: (bytes: Uint8Array) => string): MultipartPart[] {
  const b = boundaryBytes(boundary);
  const dashBoundary = new Uint8Array(b.length + 2);
  dashBoundary.set([DASH, DASH]);
  dashBoundary.set(b, 2);
  const crlfDashBoundary = new Uint8Array(b.length + 4);
  crlfDashBoundary.set([CR, LF, DASH, DASH]);
  crlfDashBoundary.set(b, 4);

  // The first delimiter opens the body, or ends the preamble.
  let first: { start: number; end: number | 'last' } | undefined;
  const opening = indexOf(body, dashBoundary, 0) === 0 ? delimiterEnd(body, 0, dashBoundary) : -1;
  if (opening !== -1) first = { start: 0, end: opening };
  else first = nextDelimiter(body, 0, dashBoundary, crlfDashBoundary);
  if (!first) throw new TypeError('the multipart/form-data body does not contain its boundary');

  const parts: MultipartPart[] = [];
  let at = first.end;
  while (at !== 'last') {
    // An empty header section is its CRLF alone.
    const headEnd = body[at] === CR && body[at + 1] === LF ? at : indexOf(body, new Uint8Array([CR, LF, CR, LF]), at);
    if (headEnd < 0) throw new TypeError('a multipart/form-data part has no end to its headers');
    // Content starts after the blank line (content that starts with `--x` is content, not an empty part).
    const contentStart = headEnd === at ? at + 2 : headEnd + 4;
    const next = nextDelimiter(body, contentStart, dashBoundary, crlfDashBoundary);
    if (!next) throw new TypeError('the multipart/form-data body ends before its closing boundary');
    const headers: Record<string, string> = Object.create(null); // a header named __proto__ is a header
    for (const line of decode(body.subarray(at, headEnd)).split('\r\n')) {
      const colon = line.indexOf(':');
      if (colon <= 0) continue;
      const name = line.slice(0, colon).trim().toLowerCase();
      // Content-Disposition keeps its trailing blanks: Node's fetch reads them (`name=a a ` is refused, `name=a a` is not).
      headers[name] = name === 'content-disposition' ? line.slice(colon + 1).trimStart() : line.slice(colon + 1).trim();
    }
    const disposition = headers['content-disposition'];
    if (disposition === undefined) throw new TypeError('a multipart/form-data part has no Content-Disposition naming its field');
    parts.push({ headers, ...formDataDisposition(disposition), type: headers['content-type'] ?? '', content: body.slice(contentStart, next.start) });
    at = next.end;
  }
  return parts;
}
