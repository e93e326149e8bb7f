/**
 * The parameters of the two header values a multipart/form-data body depends on, read as browsers
 * and Node's fetch (the WHATWG standards) read them, so a body means the same to the runtime and to
 * integration code as to whoever sent it. Shared by the host and the guest library: no Node here.
 *
 * - Content-Type (`multipart/form-data; boundary=…`), as the WHATWG MIME Sniffing standard parses a
 *   MIME type: `;`-separated `name=value`, the value a token or a quoted-string in which `\` escapes
 *   the next character; the first of a repeated name counts.
 * - A part's Content-Disposition (RFC 7578, RFC 6266): the type `form-data`, then `;`-separated
 *   `name=value`, the value a token or a quoted-string. In that quoted-string `%22`, `%0D` and `%0A`
 *   stand for `"`, CR and LF, the encoding HTML forms (and this project's FormData) give field and
 *   file names, and a backslash is a backslash (a browser sends a file `a\b.txt` as
 *   `filename="a\b.txt"`). `filename*=UTF-8''…` (RFC 5987) wins over `filename`; of a repeated
 *   name the last counts. A parameter inside a quoted value (`filename="a;name=b"`) is text.
 */

/** HTTP whitespace, as the MIME type parser skips it. */
const HTTP_WS = /^[ \t\r\n]$/;
/** Token characters: visible ASCII but the separators (RFC 2616, 2.2). */
const SEPARATORS = '()<>@,;:\\"/[]?=';
const isToken = (c: string) => c > ' ' && c < '\x7f' && !SEPARATORS.includes(c);
/** What a MIME type parameter's value may hold (HTTP quoted-string token code points). */
const QUOTED_STRING_TEXT = /^[\t\x20-\x7e\x80-\xff]*$/;

/** The first valid `name` parameter of a Content-Type value, unquoted; undefined when it has none. */
export function contentTypeParam(contentType: string, name: string): string | undefined {
  const wanted = name.toLowerCase();
  const s = contentType;
  let i = s.indexOf(';');
  if (i < 0) return undefined;
  while (i < s.length) {
    i++; // the `;`
    while (i < s.length && HTTP_WS.test(s[i])) i++;
    let start = i;
    while (i < s.length && s[i] !== ';' && s[i] !== '=') i++;
    const param = s.slice(start, i).toLowerCase();
    if (i >= s.length) break;
    if (s[i] === ';') continue;
    i++; // the `=`
    let value = '';
    if (s[i] === '"') {
      i++;
      for (;;) {
        start = i;
        while (i < s.length && s[i] !== '"' && s[i] !== '\\') i++;
        value += s.slice(start, i);
        if (i >= s.length) break;
        if (s[i++] === '"') break;
        value += i < s.length ? s[i++] : '\\';
      }
      while (i < s.length && s[i] !== ';') i++; // anything after the closing quote is dropped
    } else {
      start = i;
      while (i < s.length && s[i] !== ';') i++;
      value = s.slice(start, i).replace(/[ \t\r\n]+$/, '');
      if (!value) continue;
    }
    if (param === wanted && QUOTED_STRING_TEXT.test(value)) return value;
  }
  return undefined;
}

/** What a part's Content-Disposition says: its field name, and its file name when it is a file. */
export interface FormDataDisposition {
  name: string;
  filename?: string;
}

/** A `filename*` (or `name*`) value: `charset'language'percent-encoded` (RFC 5987), in UTF-8. */
function extendedValue(raw: string, param: string): string {
  const m = /^([^']*)'[^']*'(.*)$/s.exec(raw);
  if (m?.[1].toLowerCase() !== 'utf-8')
    throw new TypeError(`the ${param}* of a multipart/form-data part must be written UTF-8''percent-encoded text, got ${JSON.stringify(raw)}`);
  try {
    return decodeURIComponent(m[2]);
  } catch {
    throw new TypeError(`the ${param}* of a multipart/form-data part is not percent-encoded UTF-8: ${JSON.stringify(raw)}`);
  }
}

/** The field name and file name of a part's Content-Disposition value; throws a TypeError when it has no name or cannot be read. */
export function formDataDisposition(value: string): FormDataDisposition {
  const s = value.trimStart(); // a blank at the end is read, as Node's fetch reads it (`name=a a ` is refused, `name=a ` is not)
  let i = 0;
  const run = (accept: (c: string) => boolean): string => {
    const start = i;
    while (i < s.length && accept(s[i])) i++;
    return s.slice(start, i);
  };
  const blank = (c: string) => c === ' ' || c === '\t';
  const type = run(isToken);
  if (type.toLowerCase() !== 'form-data')
    throw new TypeError(`a multipart/form-data part's Content-Disposition must be form-data; name="…", got ${JSON.stringify(value)}`);
  let name: string | undefined;
  let filename: string | undefined;
  let extendedFilename: string | undefined;
  while (i < s.length) {
    if (s[i] === ';') i++;
    run(blank);
    const param = run((c) => isToken(c) && c !== '*').toLowerCase();
    if (!param) break;
    const extended = s[i] === '*';
    if (extended) i++;
    if (s[i] !== '=') break;
    i++;
    run(blank);
    let v: string;
    if (extended)
      v = extendedValue(
        run((c) => c !== ';' && c !== ' '),
        param,
      );
    else if (s[i] === '"') {
      i++;
      const quoted = run((c) => c !== '"' && c !== '\r' && c !== '\n');
      if (s[i] !== '"') throw new TypeError(`a multipart/form-data part's Content-Disposition has an unclosed quote: ${JSON.stringify(value)}`);
      i++;
      v = quoted.replace(/%(0A|0D|22)/gi, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
    } else v = run(isToken);
    if (param === 'name') name = v;
    else if (param === 'filename' && extended) extendedFilename = v;
    else if (param === 'filename') filename = v;
  }
  if (i < s.length)
    throw new TypeError(`a multipart/form-data part's Content-Disposition cannot be read after ${JSON.stringify(s.slice(0, i))}: ${JSON.stringify(value)}`);
  if (name === undefined) throw new TypeError('a multipart/form-data part has no name in its Content-Disposition');
  filename = extendedFilename ?? filename;
  return { name, ...(filename !== undefined ? { filename } : {}) };
}
