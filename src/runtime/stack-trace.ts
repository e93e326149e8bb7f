/**
 * Stack traces of integration code, pointed back at the author's files. The sandbox compiles a
 * bundle as `integration:<name>@<version>` (sandbox scriptFileName), so V8 writes its frames as
 * `integration:<name>@<version>:36:39`; the bundle's source map (made by esbuild, kept by the
 * registry on the host, never handed to an isolate) turns each into `src/handler.ts:12:11`, relative
 * to the integration folder. A frame with no mapping (esbuild's own helpers) stays as it was.
 *
 * Cheap on the hot path: nothing is done unless an error is reported or a printed line names the
 * bundle. A bundle's map is read on its first error, decoded only line by line as frames need
 * (source-map-lookup.ts), and kept as long as that loaded version is (a WeakMap on it); it is
 * at most 1 MB (registry source-maps.ts), since this runs on the host's main thread.
 */
import { posix } from 'node:path';
import { SourceMapLookup } from './source-map-lookup.ts';
import { scriptFileName, type InvocationResult, type LogLine } from '../sandbox/index.ts';

/** A loaded integration as far as mapping goes (registry LoadedIntegration). */
export interface MappedBundle {
  name: string;
  script?: { name: string; version: string };
  sourceMap?: string;
}

interface Mapper {
  fileName: string;
  frames: RegExp;
  map: SourceMapLookup;
}

/** Parsed maps per loaded version; `null` when it has none or it cannot be read. */
const mappers = new WeakMap<MappedBundle, Mapper | null>();

function mapperOf(bundle: MappedBundle): Mapper | null {
  let m = mappers.get(bundle);
  if (m !== undefined) return m;
  m = null;
  if (bundle.script && bundle.sourceMap) {
    try {
      const fileName = scriptFileName(bundle.script);
      const escaped = fileName.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      m = { fileName, frames: new RegExp(`${escaped}:(\\d+):(\\d+)`, 'g'), map: new SourceMapLookup(bundle.sourceMap) };
    } catch {
      // Failure policy: fail open. An unreadable map leaves traces as V8 wrote them.
      m = null;
    }
  }
  mappers.set(bundle, m);
  return m;
}

/**
 * Whether a frame may name `source`: a file of the integration folder, or a bundler's URL
 * (`webpack://pkg/src/x.ts`). Never a host path (absolute, `file:`, above the folder): a map
 * brought in by the author's files can name anything, and the operator must not be sent to read
 * the server's files. Never a control character either (traces reach terminals).
 */
function nameable(source: string): boolean {
  if (/[\x00-\x1f\x7f-\x9f]/.test(source)) return false;
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(source)?.[1];
  if (scheme) return scheme.length > 1 && scheme.toLowerCase() !== 'file';
  const path = posix.normalize(source.replaceAll('\\', '/'));
  return !path.startsWith('/') && path !== '..' && !path.startsWith('../');
}

/** `text` with every frame of this bundle rewritten to `file:line:column` of the author's source. */
export function mapStackTrace(text: string, bundle: MappedBundle): string {
  if (!bundle.script || !text.includes(scriptFileName(bundle.script))) return text;
  const m = mapperOf(bundle);
  if (!m) return text;
  return text.replace(m.frames, (frame, line: string, column: string) => {
    // V8 columns count from 1, source-map columns from 0.
    let p;
    try {
      p = m.map.originalPosition(Number(line), Number(column) - 1);
    } catch {
      p = null; // a malformed map: the frame stays
    }
    return p === null || !nameable(p.source) ? frame : `${p.source}:${p.line}:${p.column + 1}`;
  });
}

/** A printed line (a logged error, console.trace) with this bundle's frames mapped. */
export function mapLogLine(line: LogLine, bundle: MappedBundle): LogLine {
  const message = mapStackTrace(line.message, bundle);
  return message === line.message ? line : { ...line, message };
}

/** An invocation's result with the stack of its error, and any printed stack, mapped. */
export function mapInvocationResult(result: InvocationResult, bundle: MappedBundle): InvocationResult {
  if (!bundle.sourceMap || !bundle.script) return result;
  const fileName = scriptFileName(bundle.script);
  const e = result.error;
  const errorNamesBundle = e !== undefined && (e.stack?.includes(fileName) || e.message.includes(fileName));
  const linesNameBundle = result.logs.some((l) => l.message.includes(fileName));
  if (!errorNamesBundle && !linesNameBundle) return result;
  return {
    ...result,
    ...(errorNamesBundle && e
      ? { error: { ...e, message: mapStackTrace(e.message, bundle), ...(e.stack !== undefined ? { stack: mapStackTrace(e.stack, bundle) } : {}) } }
      : {}),
    ...(linesNameBundle ? { logs: result.logs.map((l) => mapLogLine(l, bundle)) } : {}),
  };
}
