/**
 * A bundle's source map, decoded only as far as a stack frame needs. Decoding a whole map up front
 * (as @jridgewell/trace-mapping does) took 2.3 s and 270 MB for a 5 MB bundle's map, on the main
 * thread of whichever process saw the version's first error, and the decoded arrays stayed as long
 * as the version did. Here the first lookup makes one pass over the `mappings` text, keeping where
 * each generated line starts and the decoder's state there (16 bytes a line); each lookup then
 * decodes the one line it needs.
 *
 * Maps are esbuild's own output (bundle.ts): segments within a line sorted by column, no
 * `sourceRoot`, no index maps. Anything else malformed throws, and the caller leaves frames as
 * they were.
 */

/** Where a generated position came from: `line` from 1, `column` from 0, as source maps count. */
export interface OriginalPosition {
  source: string;
  line: number;
  column: number;
}

const BASE64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const DIGIT = new Int8Array(128).fill(-1);
for (let i = 0; i < BASE64.length; i++) DIGIT[BASE64.charCodeAt(i)] = i;
const COMMA = 44;
const SEMICOLON = 59;

export class SourceMapLookup {
  readonly #sources: (string | null)[];
  readonly #mappings: string;
  /** Per generated line: offset of its first segment, then source, original line and column before it. */
  #lines?: Int32Array;
  /** The last segment decoded by #segment: its fields (relative values) and how many (1, 4 or 5). */
  readonly #fields = new Int32Array(6);
  #count = 0;

  constructor(json: string) {
    const map = JSON.parse(json) as { version?: unknown; sources?: unknown; mappings?: unknown };
    if (map.version !== 3 || typeof map.mappings !== 'string' || !Array.isArray(map.sources)) throw new Error('not a version 3 source map');
    this.#sources = map.sources.map((s: unknown) => (typeof s === 'string' ? s : null));
    this.#mappings = map.mappings;
  }

  /** The original position of generated `line` (from 1) and `column` (from 0), or null when unmapped. */
  originalPosition(line: number, column: number): OriginalPosition | null {
    const lines = (this.#lines ??= this.#index());
    if (!Number.isInteger(line) || line < 1 || line > lines.length / 4) return null;
    const m = this.#mappings;
    const at = (line - 1) * 4;
    let pos = lines[at];
    let source = lines[at + 1];
    let originalLine = lines[at + 2];
    let originalColumn = lines[at + 3];
    let generated = 0;
    let found: OriginalPosition | null = null;
    let foundAt = -1;
    while (pos < m.length) {
      const c = m.charCodeAt(pos);
      if (c === SEMICOLON) break;
      if (c === COMMA) {
        pos++;
        continue;
      }
      pos = this.#segment(pos);
      const f = this.#fields;
      const count = this.#count;
      generated += f[0];
      if (generated > column) break;
      if (count >= 4) {
        source += f[1];
        originalLine += f[2];
        originalColumn += f[3];
      }
      // Several segments at one column: the first one counts (as trace-mapping's lower bound).
      if (generated === foundAt) continue;
      foundAt = generated;
      const name = count >= 4 ? this.#sources[source] : undefined;
      found = typeof name === 'string' && originalLine >= 0 && originalColumn >= 0 ? { source: name, line: originalLine + 1, column: originalColumn } : null;
    }
    return found;
  }

  /** One pass over the mappings: where each line starts and the state carried into it. */
  #index(): Int32Array {
    const m = this.#mappings;
    let count = 1;
    for (let i = 0; i < m.length; i++) if (m.charCodeAt(i) === SEMICOLON) count++;
    const lines = new Int32Array(count * 4);
    let source = 0;
    let originalLine = 0;
    let originalColumn = 0;
    let line = 0;
    for (let pos = 0; pos < m.length; ) {
      const c = m.charCodeAt(pos);
      if (c === SEMICOLON) {
        pos++;
        line++;
        lines[line * 4] = pos;
        lines[line * 4 + 1] = source;
        lines[line * 4 + 2] = originalLine;
        lines[line * 4 + 3] = originalColumn;
      } else if (c === COMMA) pos++;
      else {
        pos = this.#segment(pos);
        if (this.#count >= 4) {
          source += this.#fields[1];
          originalLine += this.#fields[2];
          originalColumn += this.#fields[3];
        }
      }
    }
    return lines;
  }

  /** Decode the segment at `pos` into #fields and #count; the position after it. */
  #segment(pos: number): number {
    const end = decodeSegment(this.#mappings, pos, this.#fields);
    this.#count = this.#fields[5];
    return end;
  }
}

/** Decode the segment at `pos` into `out` (its fields, then their count at 5); the position after it. */
function decodeSegment(m: string, pos: number, out: Int32Array): number {
  let count = 0;
  while (pos < m.length) {
    const c = m.charCodeAt(pos);
    if (c === COMMA || c === SEMICOLON) break;
    if (count === 5) throw new Error('a segment of more than five fields');
    let value = 0;
    let shift = 0;
    let digit;
    do {
      const d = pos < m.length ? m.charCodeAt(pos++) : 128;
      digit = d < 128 ? DIGIT[d] : -1;
      // Six digits at most: 30 bits, so the value stays a positive 32-bit integer.
      if (digit < 0 || shift > 25) throw new Error('not a base64 VLQ');
      value |= (digit & 31) << shift;
      shift += 5;
    } while (digit & 32);
    out[count++] = value & 1 ? -(value >>> 1) : value >>> 1;
  }
  if (count !== 1 && count !== 4 && count !== 5) throw new Error(`a segment of ${count} fields`);
  out[5] = count;
  return pos;
}
