/**
 * `store:` URLs, read strictly. Three parsers meet one: WHATWG's URL (this program's checks, and
 * under the `pg` driver's own), the driver's fallbacks around it (pg-connection-string), and libpq's
 * (psql, pg_dump: what a person checks the URL with). On a clean URL they agree. On a password with
 * an unencoded @ / ? # they do not: each takes a different piece of the password for the host or the
 * database, and a message naming "the host" would print that piece. So a URL is taken only in the
 * shape all of them read alike, and anything else is refused with what is wrong in general terms,
 * never a part of the value (a password may be anywhere in it).
 *
 * Taken: postgres[ql]://[user[:password]@]host[:port]/database[?params], a host name, an IPv4
 * address or [an IPv6 one]; and libpq's Unix-socket forms, postgres://user:password@/database?host=/socket/dir
 * or the socket's directory percent-encoded as the host (%2Frun%2Fpostgresql).
 */

/** What a store URL names, once read. */
export interface StoreUrl {
  /** A host name or address, or a Unix socket's directory (starts with /). */
  host: string;
  port?: number;
  database: string;
  /** postgres://host:port/database, or postgres:///database?host=/socket/dir: no credentials, no other parameter. */
  display: string;
}

export type StoreUrlReading = { ok: true; url: StoreUrl } | { ok: false; problem: string; hint: string };

export const STORE_URL_FORM = 'postgres://user:password@host:5432/database';

/** How to write a password the parsers all read alike. */
export const ENCODING_HINT =
  'percent-encode the user name and password: @ → %40, / → %2F, ? → %3F, # → %23, % → %25, a space → %20, [ ] → %5B %5D, : in a user name → %3A (encodeURIComponent does it)';

/** How a clean URL looks, for a refusal that is about its shape rather than its characters. */
const SHAPE_HINT = `${STORE_URL_FORM}, or a Unix socket: postgres://user:password@/database?host=/run/postgresql; or \${{ env.DATABASE_URL }}`;

const KNOWN_SCHEMES = /^(mysql|mariadb|mssql|sqlserver|sqlite3?|file|https?|redis|mongodb(\+srv)?|jdbc|cockroachdb)$/i;

/** A % that starts no %XX escape, or escapes that decode to no UTF-8 text. */
function badEscapes(s: string): boolean {
  if (/%(?![0-9a-f]{2})/i.test(s)) return true;
  try {
    decodeURIComponent(s);
    return false;
  } catch {
    return true;
  }
}

/** The URL read, or what is wrong with it (in words that repeat none of it). */
export function readStoreUrl(raw: string): StoreUrlReading {
  const refuse = (problem: string, hint = ENCODING_HINT): StoreUrlReading => ({ ok: false, problem, hint });
  const scheme = /^([a-z][a-z0-9+.-]{0,15}):\/\//i.exec(raw);
  if (!scheme) return refuse('is not a postgres:// URL', SHAPE_HINT);
  if (!/^postgres(ql)?$/i.test(scheme[1]))
    // Named only when it is a well-known one: whatever else stands before :// may be a password.
    return refuse(KNOWN_SCHEMES.test(scheme[1]) ? `uses ${scheme[1]}:, not postgres:` : 'does not start with postgres:// or postgresql://', SHAPE_HINT);
  if (/[\s\x00-\x1f\x7f]/.test(raw)) return refuse('holds a space or a control character');
  if (raw.includes('#')) return refuse('holds a #, which ends a URL (a # in a password cuts it there)');
  const rest = raw.slice(scheme[0].length);
  const authorityEnd = rest.search(/[/?]/);
  const authority = authorityEnd < 0 ? rest : rest.slice(0, authorityEnd);
  const tail = authorityEnd < 0 ? '' : rest.slice(authorityEnd);
  const ats = raw.split('@').length - 1;
  // One @ ends the credentials; another, or one after a / or ?, is a password's: each parser would
  // take a different piece of it for the host or the database.
  if (ats > 1) return refuse('holds more than one @ (an @ in a password must be encoded)');
  if (ats === 1 && !authority.includes('@')) return refuse('holds an @ after a / or ? (a password with / or ? in it must be encoded)');
  const at = authority.indexOf('@');
  const userinfo = at < 0 ? undefined : authority.slice(0, at);
  const hostport = at < 0 ? authority : authority.slice(at + 1);
  if (userinfo !== undefined && (/[[\]]/.test(userinfo) || badEscapes(userinfo)))
    return refuse('has a user name or password with a [ ] or a % that is not a %XX escape');

  const bracketed = /^\[([0-9a-f:.]+)\](?::(\d*))?$/i.exec(hostport);
  const named = bracketed ? undefined : /^([a-z0-9._~%!$&'()*;=-]*)(?::(\d*))?$/i.exec(hostport);
  const hostParts = bracketed ?? named;
  if (!hostParts)
    return refuse(/,/.test(hostport) ? 'names several hosts (one host only)' : 'has a host part that is not a host name, an address or host:port', SHAPE_HINT);
  if (named && badEscapes(named[1])) return refuse('has a host with a % that is not a %XX escape');
  if (named && !named[1] && named[2])
    return refuse("names a port but no host (a Unix socket's port goes in the parameters: ?host=/run/postgresql&port=5433)", SHAPE_HINT);
  let host = bracketed ? bracketed[1] : decodeURIComponent(named![1]);
  let port = hostParts[2] ? Number(hostParts[2]) : undefined;

  const q = tail.indexOf('?');
  const path = q < 0 ? tail : tail.slice(0, q);
  const query = q < 0 ? '' : tail.slice(q + 1);
  if (badEscapes(path) || badEscapes(query)) return refuse('has a % that is not a %XX escape');
  // The driver reads the query's + as a space, libpq as a +.
  if (query.includes('+')) return refuse('has a + in its parameters (write %2B, or %20 for a space)', SHAPE_HINT);
  const params = new URLSearchParams(query);
  const queryHost = params.get('host');
  if (queryHost) host = queryHost;
  const queryPort = params.get('port');
  if (queryPort) {
    if (!/^\d+$/.test(queryPort)) return refuse('has a port= that is not a number', SHAPE_HINT);
    port = Number(queryPort);
  }
  if (port !== undefined && (port < 1 || port > 65535)) return refuse('has a port outside 1-65535', SHAPE_HINT);
  if (!host) return refuse('names no host', SHAPE_HINT);
  const database = path.slice(1);
  if (!database) return refuse('names no database (…/database at its end)', SHAPE_HINT);
  // The driver decodes the database name with decodeURI (which keeps %2F, %40, … as they are), libpq fully.
  if (decodeURI(database) !== decodeURIComponent(database))
    return refuse('has a database name with an escaped / @ : ? or other delimiter, which the drivers read differently');

  if (!sameForWhatwg(raw, { userinfo, authorityHost: bracketed ? undefined : named![1], port: hostParts[2], database }))
    return refuse("is read differently by PostgreSQL's tools and by its driver", SHAPE_HINT);

  const shownPort = port !== undefined ? `:${port}` : '';
  const display = host.startsWith('/')
    ? `postgres:///${database}?host=${host}${port !== undefined ? `&port=${port}` : ''}`
    : `postgres://${queryHost ? (queryHost.includes(':') ? `[${queryHost}]` : queryHost) : bracketed ? `[${host}]` : named![1]}${shownPort}/${database}`;
  return { ok: true, url: { host, ...(port !== undefined ? { port } : {}), database: decodeURIComponent(database), display } };
}

/**
 * The check behind the grammar above: WHATWG's URL (the driver's parser; with its stand-in host
 * where the socket form leaves the host empty) reads the same credentials, host, port and database.
 */
function sameForWhatwg(raw: string, mine: { userinfo?: string; authorityHost?: string; port?: string; database: string }): boolean {
  let u: URL;
  const noHost = mine.authorityHost === '' && mine.userinfo !== undefined;
  try {
    u = new URL(noHost ? raw.replace('@/', '@___DUMMY___/') : raw);
  } catch {
    return false;
  }
  const colon = mine.userinfo?.indexOf(':') ?? -1;
  const user = mine.userinfo === undefined ? '' : colon < 0 ? mine.userinfo : mine.userinfo.slice(0, colon);
  const password = colon < 0 ? '' : mine.userinfo!.slice(colon + 1);
  try {
    if (decodeURIComponent(u.username) !== decodeURIComponent(user)) return false;
    if (decodeURIComponent(u.password) !== decodeURIComponent(password)) return false;
    if (mine.authorityHost !== undefined && !noHost && decodeURIComponent(u.hostname) !== decodeURIComponent(mine.authorityHost)) return false;
    if ((u.port ? Number(u.port) : undefined) !== (mine.port ? Number(mine.port) : undefined)) return false;
    return decodeURI(u.pathname.slice(1)) === decodeURI(mine.database);
  } catch {
    return false;
  }
}

/** The URL as it may be shown: no credentials, no parameters but a socket's directory and port. */
export function displayStoreUrl(raw: string): string {
  const r = readStoreUrl(raw);
  return r.ok ? r.url.display : 'postgres://(unreadable URL)';
}
