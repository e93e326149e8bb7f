/**
 * The thread behind the synchronous PostgreSQL bridge (bridge.ts): it owns the connections and
 * runs one request at a time for the store's thread, which waits on a shared flag. A second
 * connection, made on the first LISTEN, forwards notifications as ordinary messages.
 */
import { parentPort, workerData, type MessagePort } from 'node:worker_threads';
import pg from 'pg';

// Integers as numbers, as SQLite hands them: BIGINT columns hold ms timestamps and row numbers
// (well inside 2^53), COUNT(*) is BIGINT, SUM/AVG are NUMERIC.
pg.types.setTypeParser(20, (v) => Number(v));
pg.types.setTypeParser(1700, (v) => Number(v));

interface Data {
  url: string;
  flag: SharedArrayBuffer;
  port: MessagePort;
  applicationName: string;
  readonly: boolean;
  queryTimeoutMs: number;
  connectTimeoutMs: number;
}
const data = workerData as Data;
const flag = new Int32Array(data.flag);
const port = data.port;

export type Request =
  // `session`: inside a transaction, the connection it began on; a request for a lost one fails
  // rather than autocommit on a new connection.
  // A named statement's text is sent once; later requests name it only (less to copy each time).
  | { op: 'query'; text?: string; params?: unknown[]; name?: string; simple?: boolean; session?: number }
  | { op: 'listen'; channel: string }
  | { op: 'close' };

export type Answer =
  | { ok: true; rows: Record<string, unknown>[]; rowCount: number; session: number }
  | { ok: false; message: string; code?: string; detail?: string; where?: string };

let client: pg.Client | undefined;
const texts = new Map<string, string>();
let session = 0;
let listener: pg.Client | undefined;
const channels = new Set<string>();

async function connection(): Promise<pg.Client> {
  if (client) return client;
  const c = new pg.Client(clientOptions(data.applicationName));
  // A broken connection is dropped; the next request opens a new one (the store's health says so meanwhile).
  c.on('error', () => {
    if (client === c) client = undefined;
  });
  await c.connect();
  await c.query(`SET statement_timeout = ${Math.max(500, data.queryTimeoutMs - 1_000)}${data.readonly ? '; SET default_transaction_read_only = on' : ''}`);
  client = c;
  session++;
  return c;
}

async function listen(channel: string): Promise<void> {
  channels.add(channel);
  if (!listener) {
    const c = new pg.Client(clientOptions(`${data.applicationName} (listen)`));
    c.on('notification', (n) => parentPort!.postMessage({ notification: { channel: n.channel, payload: n.payload ?? '' } }));
    c.on('error', () => {
      if (listener !== c) return;
      listener = undefined;
      // Notifications sent while no connection listened are lost: the store's users are told to look again.
      parentPort!.postMessage({ reconnect: true });
      setTimeout(() => reconnectListener(), 500).unref();
    });
    await c.connect();
    listener = c;
  }
  await listener.query(`LISTEN ${quoteIdent(channel)}`);
}

/**
 * Both connections: a connect that hangs fails, a query the server never answers fails (the store's
 * thread waits a little longer), and TCP keepalive finds a peer that vanished without a word.
 */
function clientOptions(applicationName: string): pg.ClientConfig {
  return {
    connectionString: data.url,
    application_name: applicationName,
    connectionTimeoutMillis: data.connectTimeoutMs,
    query_timeout: data.queryTimeoutMs,
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
  };
}

// A half-open listening connection raises no error by itself: a query every 30 s finds it out.
setInterval(() => {
  const c = listener;
  if (c) c.query('SELECT 1').catch(() => c.emit('error', new Error('the listening connection stopped answering')));
}, 30_000).unref();

async function reconnectListener(): Promise<void> {
  const wanted = [...channels];
  channels.clear();
  try {
    for (const ch of wanted) await listen(ch);
    parentPort!.postMessage({ reconnect: true });
  } catch {
    for (const ch of wanted) channels.add(ch);
    setTimeout(() => reconnectListener(), 1000).unref();
  }
}

function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/** Structured clone turned Buffers into Uint8Arrays on the way here; pg sends Buffers as bytea. */
function params(values: unknown[] | undefined): unknown[] | undefined {
  return values?.map((v) => (v instanceof Uint8Array && !Buffer.isBuffer(v) ? Buffer.from(v.buffer, v.byteOffset, v.byteLength) : v));
}

async function handle(req: Request): Promise<Answer> {
  try {
    if (req.op === 'listen') {
      try {
        await listen(req.channel);
      } catch {
        // The server is out of reach: listening starts when it is back (and the store is told to
        // look again then); the statements meanwhile fail on their own.
        listener = undefined;
        setTimeout(() => void reconnectListener(), 1_000).unref();
      }
      return { ok: true, rows: [], rowCount: 0, session };
    }
    if (req.op === 'close') {
      await Promise.allSettled([client?.end(), listener?.end()]);
      client = listener = undefined;
      return { ok: true, rows: [], rowCount: 0, session };
    }
    if (req.session !== undefined && (req.session !== session || !client))
      return { ok: false, message: 'the connection to PostgreSQL was lost during this transaction', code: '08006' };
    let c: pg.Client;
    try {
      c = await connection();
    } catch (e) {
      // The server's own refusal (too many connections, starting up, a password) says why; anything
      // else (refused, no route, a connect that timed out: often no code at all) is SQLSTATE 08001.
      if (e instanceof pg.DatabaseError) throw e;
      return { ok: false, message: `cannot connect to PostgreSQL: ${(e as Error).message ?? String(e)}`, code: '08001' };
    }
    if (req.simple) {
      await c.query(req.text!);
      return { ok: true, rows: [], rowCount: 0, session };
    }
    let text = req.text;
    if (req.name) {
      if (text === undefined) text = texts.get(req.name);
      else texts.set(req.name, text);
    }
    if (text === undefined) return { ok: false, message: `statement ${req.name} was never sent`, code: 'XX000' };
    const r = await c.query({ text, values: params(req.params), ...(req.name ? { name: req.name } : {}) });
    return { ok: true, rows: r.rows, rowCount: r.rowCount ?? 0, session };
  } catch (e) {
    const err = e as { message?: string; code?: string; detail?: string; where?: string };
    // No answer in time (pg's query_timeout), or the connection ended under the statement (a server
    // that crashed): the driver gives no SQLSTATE. The connection's state is unknown (a reply may
    // still come), so it is dropped and the next request opens another.
    const timedOut = !err.code && /timeout/i.test(err.message ?? '');
    const ended = !err.code && /Connection terminated|not queryable|Client was closed/i.test(err.message ?? '');
    if (timedOut || ended) {
      const c = client;
      client = undefined;
      c?.end().catch(() => {});
      return { ok: false, message: timedOut ? `PostgreSQL did not answer in time (${err.message})` : `the connection to PostgreSQL ended (${err.message})`, code: '08006' };
    }
    return { ok: false, message: err.message ?? String(e), code: err.code, detail: err.detail, where: err.where };
  }
}

port.on('message', async (req: Request) => {
  const answer = await handle(req);
  port.postMessage(answer);
  Atomics.store(flag, 0, 1);
  Atomics.notify(flag, 0);
  if (req.op === 'close') port.close();
});
