/**
 * The node id lock across a database restart, with real `switchyard serve` nodes on a real
 * PostgreSQL restarted by pg_ctl, and a second node started from a copy of the first one's node id
 * (a copied data_dir). The advisory lock on the id goes with its session, so a restart frees it:
 *   - the running node takes it back at once, and the copy started after is refused: no delivery
 *     the running node holds is taken back by the copy and sent twice;
 *   - a node that could not take it back in time (frozen through the restart: the copy got the id
 *     first) stops serving as that id, says so naming the node-id file, and exits; the copy keeps
 *     the id; the stopped node started again is refused. Under the supervisor and alone;
 *   - the lock's own backend stalls (SIGSTOP of that one backend) past the check's time-out: the
 *     node's own earlier session still holds the lock, and is no other node: the node keeps serving,
 *     ends that session and takes the lock back, and a copy is refused meanwhile and after;
 *   - a node restarted at once after a crash, its old session still held by the server: it waits
 *     for that session to end and starts.
 * Skipped where PostgreSQL cannot be started (test/helpers/postgres.ts says why).
 */
import { describe, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { copyFileSync, cpSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import pg from 'pg';
import { adminApi, freshPostgresDatabase, ROOT, tmpDir, waitFor } from './helpers/index.ts';
import { postgresFor, type PgServer } from './helpers/postgres.ts';
import { samplePayload } from '../src/events/index.ts';

const TOKEN = 'test-admin-token-node-id-lock';
/** pg_advisory_lock's first key for node ids (src/store/lease-owner.ts). */
const NODE_LOCK = 0x73776e64;

interface Node {
  name: string;
  dataDir: string;
  configFile: string;
  child?: ChildProcess;
  output: string;
  url?: string;
}

/** A receiver that holds every answer until `open()`, and counts what it received per event. */
async function receiver(t: TestContext) {
  const received = new Map<string, number>();
  let gate!: () => void;
  const opened = new Promise<void>((r) => (gate = r));
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      const id = String(JSON.parse(body).sourceEventId);
      received.set(id, (received.get(id) ?? 0) + 1);
      void opened.then(() => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => {
    gate();
    server.closeAllConnections();
    server.close();
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, received, open: gate };
}

function cluster(t: TestContext, server: PgServer) {
  const dir = tmpDir(t);
  const url = freshPostgresDatabase(join(dir, 'db'), server.url);
  const integrations = join(dir, 'integrations');
  cpSync(join(ROOT, 'integrations/webhook'), join(integrations, 'webhook'), { recursive: true });
  const nodes: Node[] = [];
  t.after(() => nodes.forEach((n) => killGroup(n.child)));

  const node = (name: string, processes: number): Node => {
    const home = join(dir, name);
    mkdirSync(join(home, 'data'), { recursive: true });
    const configFile = join(home, 'config.yaml');
    writeFileSync(
      configFile,
      [
        'server:',
        '  port: 0',
        `  processes: ${processes}`,
        // A frozen supervisor must not kill its processes for missed pings when it wakes.
        '  heartbeat_timeout: 120s',
        '  shutdown_timeout: 2s',
        `store: ${JSON.stringify(url)}`,
        `data_dir: ${JSON.stringify(join(home, 'data'))}`,
        `integrations_dir: ${JSON.stringify(integrations)}`,
        `admin_token: ${TOKEN}`,
        'log:',
        '  format: json',
        'webhooks:',
        '  allow_private_networks: true',
        // The receiver holds its answers through the restart: no attempt times out meanwhile.
        '  timeout: 60s',
        '  max_retries: 0',
      ].join('\n'),
    );
    const n = { name, dataDir: join(home, 'data'), configFile, output: '' };
    nodes.push(n);
    return n;
  };

  /** Start a node; resolves once it serves and is ready, or with its exit code if it stops first. */
  const start = async (n: Node): Promise<{ served: true } | { served: false; code: number | null; output: string }> => {
    const child = spawn(process.execPath, ['--no-node-snapshot', join(ROOT, 'src/main.ts'), 'serve', '--config', n.configFile], {
      cwd: ROOT,
      env: { ...process.env, NO_COLOR: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    n.child = child;
    const from = n.output.length;
    const onData = (d: Buffer) => (n.output += d);
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    const exited = once(child, 'exit').then(() => ({ served: false as const, code: child.exitCode, output: n.output.slice(from) }));
    const gone = () => child.exitCode !== null || child.signalCode !== null;
    const m = await waitFor(() => gone() || /"msg":"switchyard serving","url":"(http:\/\/[^"]+)"/.exec(n.output.slice(from)), 60_000, 50);
    if (m === true) return exited;
    n.url = m[1];
    await waitFor(async () => gone() || (await fetch(`${n.url}/readyz`)).status === 200, 30_000, 50);
    return gone() ? exited : { served: true };
  };

  const api = (n: Node, method: string, path: string, body?: unknown) => adminApi(String(n.url), TOKEN, method, path, body);

  return { url, node, start, api };
}

function killGroup(child: ChildProcess | undefined): void {
  if (!child?.pid) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    /* gone */
  }
}

/** Whether any process of the node's group is left (its serving processes too). */
function groupAlive(child: ChildProcess): boolean {
  try {
    process.kill(-child.pid!, 0);
    return true;
  } catch {
    return false;
  }
}

/** A client of the database for the test's own looks (made again after a restart). */
async function look(url: string, t: TestContext): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: url });
  c.on('error', () => {});
  await c.connect();
  t.after(() => c.end().catch(() => {}));
  return c;
}

/** Sessions holding the node id lock on `id`. */
async function lockHolders(c: pg.Client, id: string): Promise<number> {
  const r = await c.query(
    `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2
       AND classid = $1::bigint::oid AND objid = (hashtext($2)::bigint & 4294967295)::oid`,
    [NODE_LOCK, id],
  );
  return r.rows[0].n;
}

const nodeIdOf = (n: Node) => readFileSync(join(n.dataDir, 'node-id'), 'utf8').trim();
const copyNodeId = (from: Node, to: Node) => copyFileSync(join(from.dataDir, 'node-id'), join(to.dataDir, 'node-id'));

/** The backend (server process) of the session that holds the node id lock on `id`, if any. */
async function lockBackend(c: pg.Client, id: string): Promise<number | undefined> {
  const r = await c.query(
    `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2
       AND classid = $1::bigint::oid AND objid = (hashtext($2)::bigint & 4294967295)::oid`,
    [NODE_LOCK, id],
  );
  return r.rows[0]?.pid;
}

/** SIGSTOP one backend of the server (not the server): its session stays open and holds its locks, but answers nothing. */
function freezeBackend(t: TestContext, pid: number): () => void {
  process.kill(pid, 'SIGSTOP');
  let thawed = false;
  const thaw = () => {
    if (thawed) return;
    thawed = true;
    try {
      process.kill(pid, 'SIGCONT');
    } catch {
      /* gone */
    }
  };
  // Before the server's own stop (a stopped backend would hold up pg_ctl stop).
  t.after(thaw);
  return thaw;
}

// Three at a time, each on a server of its own: they wait on real clocks (a frozen backend, the
// check's 5 s time-out) far more than they work: 88 s one after another in a whole run, 43 s so.
describe('the node id lock', { concurrency: 3 }, () => {
  test('PostgreSQL restarts under a running node: it takes its id back at once, and a copy started after is refused; no delivery is sent twice', async (t) => {
    const server = await postgresFor(t);
    if (!server) return;
    const hook = await receiver(t);
    const c = cluster(t, server);
    const a = c.node('a', 2);
    assert.deepEqual(await c.start(a), { served: true });
    const id = nodeIdOf(a);
    assert.equal(
      (await c.api(a, 'POST', '/api/v1/installations', { integration: 'webhook', configuration: { webhook_url: hook.url, event_types: 'site_view' } })).status,
      201,
    );
    const events = Array.from({ length: 4 }, (_, i) => samplePayload('site_view', { eventId: `evt_lock_${i}` }));
    for (const e of events) assert.equal((await c.api(a, 'POST', '/api/v1/events', e)).status, 202);
    // Node A sends all four, and waits for the answers (held) with their leases.
    await waitFor(() => events.every((e) => hook.received.get(e.eventId as string) === 1), 20_000, 20);

    server.restart();
    const db = await look(c.url, t);
    const retaken = await waitFor(async () => (await lockHolders(db, id)) === 1, 15_000, 50).catch(() => false);

    // A node started from a copied data_dir: same id.
    const b = c.node('b', 1);
    copyNodeId(a, b);
    const started = await c.start(b);
    hook.open();
    // Whatever was taken is sent by now (B recovers leases at its start; A completes its four).
    await waitFor(async () => (await db.query("SELECT count(*)::int AS n FROM webhook_deliveries WHERE status = 'delivered'")).rows[0].n === 4, 30_000, 50);
    await new Promise((r) => setTimeout(r, 1_000));
    const twice = events.map((e) => e.eventId as string).filter((e) => hook.received.get(e) !== 1);

    assert.equal(started.served, false, `the copy was let in beside the running node; deliveries sent twice: ${twice.join(', ') || 'none yet'}`);
    assert.deepEqual(twice, [], 'no delivery sent twice');
    assert.ok(retaken, 'the running node took its id back after the restart');
    if (!started.served) assert.notEqual(started.code, 0);
    assert.match(
      !started.served ? started.output : '',
      new RegExp(`another node on this store already runs as node ${id} \\(${join(b.dataDir, 'node-id').replaceAll('/', '\\/')}\\)`),
    );
    assert.match(a.output, /"msg":"the node id lock went with its connection to PostgreSQL/);
    assert.match(a.output, /"msg":"node id lock taken back"/);

    // A still serves as itself: a new event is delivered once.
    assert.equal((await c.api(a, 'GET', '/readyz')).status, 200);
    assert.equal((await c.api(a, 'POST', '/api/v1/events', samplePayload('site_view', { eventId: 'evt_lock_after' }))).status, 202);
    await waitFor(() => hook.received.get('evt_lock_after') === 1, 15_000, 20);
    assert.equal(await lockHolders(db, id), 1);
  });

  for (const processes of [2, 1]) {
    test(`a node frozen through a PostgreSQL restart finds its id taken by a copy: it stops serving as that id, names the node-id file, exits; the copy keeps it (${processes === 1 ? 'one process' : 'under the supervisor'})`, async (t) => {
      const server = await postgresFor(t);
      if (!server) return;
      const hook = await receiver(t);
      hook.open();
      const c = cluster(t, server);
      const a = c.node('a', processes);
      assert.deepEqual(await c.start(a), { served: true });
      const id = nodeIdOf(a);

      // The lock holder (the supervisor, or the one process) cannot act while the database restarts.
      process.kill(a.child!.pid!, 'SIGSTOP');
      const exited = once(a.child!, 'exit');
      let b: Node;
      try {
        server.restart();
        b = c.node('b', 1);
        copyNodeId(a, b);
        assert.deepEqual(await c.start(b), { served: true }, 'the id was free: the copy takes it');
      } finally {
        process.kill(a.child!.pid!, 'SIGCONT');
      }

      let timer: NodeJS.Timeout | undefined;
      const [code] = (await Promise.race([exited, new Promise((r) => (timer = setTimeout(() => r([undefined]), 30_000)))])) as [number | null | undefined];
      clearTimeout(timer);
      assert.equal(code, 1, `node A exits with 1 once it finds its id taken:\n${a.output.slice(-3000)}`);
      const file = join(a.dataDir, 'node-id');
      const said = a.output.split('\n').find((l) => l.includes(`another node took this node's id ${id}`));
      assert.ok(said, a.output.slice(-3000));
      const line = JSON.parse(said);
      assert.equal(line.level, 'error');
      assert.ok(line.msg.includes(file), 'the message names the node-id file');
      assert.match(line.hint, /delete .*node-id/);
      await waitFor(() => !groupAlive(a.child!), 10_000, 50);

      // B holds the id and serves.
      const db = await look(c.url, t);
      assert.equal(await lockHolders(db, id), 1);
      assert.equal(
        (await c.api(b, 'POST', '/api/v1/installations', { integration: 'webhook', configuration: { webhook_url: hook.url, event_types: 'site_view' } }))
          .status,
        201,
      );
      assert.equal((await c.api(b, 'POST', '/api/v1/events', samplePayload('site_view', { eventId: 'evt_after_lost' }))).status, 202);
      await waitFor(() => hook.received.get('evt_after_lost') === 1, 15_000, 20);

      // A started again while B runs: refused at its start.
      const again = await c.start(a);
      assert.equal(again.served, false);
      assert.match(!again.served ? again.output : '', new RegExp(`already runs as node ${id}`));
    });
  }

  for (const thawAfter of [true, false]) {
    test(`the node id lock's own backend stalls past the check's time-out (${thawAfter ? 'then answers again' : 'and never answers again'}): the node keeps serving as its id, takes its lock back from its own old session, and a copy is still refused`, async (t) => {
      const server = await postgresFor(t);
      if (!server) return;
      const hook = await receiver(t);
      hook.open();
      const c = cluster(t, server);
      const a = c.node('a', thawAfter ? 2 : 1);
      assert.deepEqual(await c.start(a), { served: true });
      const id = nodeIdOf(a);
      assert.equal(
        (await c.api(a, 'POST', '/api/v1/installations', { integration: 'webhook', configuration: { webhook_url: hook.url, event_types: 'site_view' } }))
          .status,
        201,
      );
      const db = await look(c.url, t);
      const old = await lockBackend(db, id);
      assert.ok(old, 'the node holds its id lock');

      const thaw = freezeBackend(t, old);
      const frozenAt = Date.now();
      try {
        // The check (SELECT 1 every 5 s, 5 s time-out) gives up on the frozen session and connects again.
        await waitFor(() => a.output.includes('the node id lock went with its connection to PostgreSQL'), 20_000, 50);
        // A copy started meanwhile is refused: the id is this node's, whichever of its sessions holds it.
        const b = c.node('b', 1);
        copyNodeId(a, b);
        const copy = await c.start(b);
        assert.equal(copy.served, false, 'a copy started while the lock backend is frozen was let in');
        assert.match(!copy.served ? copy.output : '', new RegExp(`already runs as node ${id}`));
        if (thawAfter) {
          await new Promise((r) => setTimeout(r, Math.max(0, 13_000 - (Date.now() - frozenAt))));
          thaw();
          await waitFor(() => a.output.includes('"msg":"node id lock taken back"'), 20_000, 50);
          const now = await lockBackend(db, id);
          assert.ok(now && now !== old, 'the lock is held by a new session of the node');
        } else {
          // Frozen for good (as long as this test looks): the node serves on, its old session holding the id.
          await new Promise((r) => setTimeout(r, 3_000));
          assert.equal(await lockBackend(db, id), old);
        }

        assert.equal(a.child!.exitCode, null, `node A stopped:\n${a.output.slice(-3000)}`);
        assert.doesNotMatch(a.output, /another node took this node's id/);
        assert.equal((await c.api(a, 'GET', '/readyz')).status, 200);
        assert.equal((await c.api(a, 'POST', '/api/v1/events', samplePayload('site_view', { eventId: 'evt_after_stall' }))).status, 202);
        await waitFor(() => hook.received.get('evt_after_stall') === 1, 15_000, 20);

        // And a copy started now is refused as well.
        const again = await c.start(b);
        assert.equal(again.served, false, 'a copy started after the stall was let in');
      } finally {
        thaw();
      }
      // Answering again, the old session ends; the node's lock is its own new session's.
      await waitFor(() => a.output.includes('"msg":"node id lock taken back"'), 20_000, 50);
      assert.equal(a.child!.exitCode, null);
      assert.equal(await lockHolders(db, id), 1);
    });
  }

  test('a node restarted at once after a crash whose lock session the server has not ended yet: it waits for that session to end and starts; a live copy is still refused', async (t) => {
    const server = await postgresFor(t);
    if (!server) return;
    const c = cluster(t, server);
    const a = c.node('a', 1);
    assert.deepEqual(await c.start(a), { served: true });
    const id = nodeIdOf(a);
    const db = await look(c.url, t);
    const old = await lockBackend(db, id);
    assert.ok(old);

    // The node's host goes away without a word: its session lives on in the server for a while (here,
    // a frozen backend: it cannot see that its client has gone).
    const thaw = freezeBackend(t, old);
    killGroup(a.child);
    await once(a.child!, 'exit');
    // Until the server notices (here, 3 s on), then the session ends and frees the lock.
    const timer = setTimeout(thaw, 3_000);
    t.after(() => clearTimeout(timer));
    const restarted = await c.start(a);
    assert.deepEqual(restarted, { served: true }, `the restarted node was refused:\n${a.output.slice(-2000)}`);
    assert.equal(await lockHolders(db, id), 1);

    // A copy started beside it is refused: that session is alive.
    const b = c.node('b', 1);
    copyNodeId(a, b);
    const copy = await c.start(b);
    assert.equal(copy.served, false);
    assert.match(!copy.served ? copy.output : '', new RegExp(`already runs as node ${id}`));
  });
});
