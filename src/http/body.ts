/** JSON request bodies for the management API: a size cap and errors that say what is wrong. */
import { SwitchyardError } from '../errors.ts';
import { MAX_JSON_DEPTH, nestedDeeperThan, readBodyLimited } from '../runtime/envelope.ts';

export async function readJson<T = Record<string, unknown>>(req: Request, limit: number, opts: { optional?: boolean; array?: boolean; size?: (bytes: number) => void } = {}): Promise<T> {
  const bytes = await readBodyLimited(req, limit);
  opts.size?.(bytes.byteLength);
  if (!bytes.byteLength) {
    if (opts.optional) return {} as T;
    throw new SwitchyardError('bad_request', 'the request needs a JSON body');
  }
  const type = req.headers.get('content-type') ?? '';
  if (type && !/^application\/(.+\+)?json\b/i.test(type))
    throw new SwitchyardError('unsupported_media_type', `expected Content-Type: application/json, got "${type}"`);
  let v: unknown;
  try {
    v = JSON.parse(new TextDecoder().decode(bytes));
    if (!v || typeof v !== 'object' || (Array.isArray(v) && !opts.array)) throw new Error(`the body must be a JSON object${opts.array ? ' or an array of them' : ''}`);
  } catch (e) {
    throw new SwitchyardError('bad_request', `the body is not a valid JSON object: ${(e as Error).message}`);
  }
  // What is stored or handed to integration code must copy into the sandbox (see MAX_JSON_DEPTH).
  if (nestedDeeperThan(v, MAX_JSON_DEPTH))
    throw new SwitchyardError('bad_request', `the body is nested deeper than ${MAX_JSON_DEPTH} levels`, { hint: 'flatten the data' });
  return v as T;
}

/** A query parameter that must be one of `allowed` (400 naming the value otherwise). */
export function oneOfParam<T extends string>(value: string | null, name: string, allowed: readonly T[]): T | undefined {
  if (value === null || value === '') return undefined;
  if (!(allowed as readonly string[]).includes(value))
    throw new SwitchyardError('bad_request', `${name} must be one of ${allowed.join(', ')}, got "${value}"`, { where: name });
  return value as T;
}

/** `limit` (1-500) and `cursor` query parameters, with errors that name them. */
export function pageParams(q: URLSearchParams): { limit?: number; cursor?: string } {
  const raw = q.get('limit');
  const limit = raw === null || raw === '' ? undefined : Number(raw);
  if (limit !== undefined && (!Number.isInteger(limit) || limit < 1 || limit > 500))
    throw new SwitchyardError('bad_request', `limit must be a whole number from 1 to 500, got "${raw}"`, { where: 'limit' });
  const cursor = q.get('cursor') || undefined;
  if (cursor !== undefined && !/^\d+$/.test(cursor))
    throw new SwitchyardError('bad_request', `cursor must be the nextCursor of a previous page, got "${cursor}"`, { where: 'cursor' });
  return { limit, cursor };
}
