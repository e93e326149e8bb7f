/**
 * `store:` URLs: a password with an unencoded @ / ? # % or a space is refused where the
 * configuration is read (file:line:col, how to encode), and no message, display or start-up line
 * ever holds a piece of it; libpq's Unix-socket form reaches a real PostgreSQL on its socket.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { parseConfigText } from '../src/config/index.ts';
import { SwitchyardError } from '../src/errors.ts';
import { connectStore } from '../src/store/index.ts';
import { displayStoreUrl, readStoreUrl } from '../src/store/postgres/url.ts';
import { allMigrations } from '../src/server/migrations.ts';
import { postgresFor } from './helpers/postgres.ts';
import { runCli, sql, tmpDir } from './helpers/index.ts';

/** Every piece of `secret` 3 characters long or more that `text` holds (none, or it leaked). */
function pieces(secret: string, text: string): string[] {
  const found: string[] = [];
  for (let i = 0; i + 3 <= secret.length; i++) if (text.includes(secret.slice(i, i + 3))) found.push(secret.slice(i, i + 3));
  return found;
}

/** What loading `store: <url>` says: the refusal's where, message and hint, or the URL as shown. */
function load(url: string): { refused: boolean; where?: string; text: string } {
  try {
    parseConfigText(`store: ${JSON.stringify(url)}\n`, 'c.yaml', {});
  } catch (e) {
    assert.ok(e instanceof SwitchyardError, String(e));
    const p = e.problems.find((x) => x.message.startsWith('store:'));
    assert.ok(p, `a problem names store: for ${JSON.stringify(url)}`);
    return { refused: true, where: p.where, text: `${e.message}\n${JSON.stringify(e.problems)}\n${e.hint ?? ''}` };
  }
  return { refused: false, text: displayStoreUrl(url) };
}

/**
 * Passwords made of runs of consonants (which no message spells) between the characters a URL
 * gives a meaning to: every 3 characters of one hold a consonant of its own, so a piece found in
 * an output is a leak, not a coincidence.
 */
function passwords(n: number): string[] {
  let seed = 7;
  const rand = (k: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % k);
  const letters = 'BCDFGHJKMVWXZ';
  const specials = ['@', ':', '/', '?', '#', '%', ' ', '%7E', '@@', '//', ': ', '?/', '%%', '@/', '/@', '%G'];
  return Array.from({ length: n }, () => {
    let pw = '';
    const parts = 2 + rand(4);
    for (let i = 0; i < parts; i++) {
      for (let j = 0, len = 3 + rand(2); j < len; j++) pw += letters[rand(letters.length)];
      if (i < parts - 1 || rand(2)) pw += specials[rand(specials.length)];
    }
    return pw;
  });
}

async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

test('the reported URL: a password with an unencoded @ and / is refused at config load with file:line:col and how to encode, no piece of it printed', async (t) => {
  const password = 's3cr3t@pr0d/2026';
  const url = `postgres://switchyard:${password}@127.0.0.1:5432/switchyard`;
  const r = load(url);
  assert.equal(r.refused, true);
  assert.equal(r.where, 'c.yaml:1:8');
  assert.match(r.text, /more than one @/);
  assert.match(r.text, /@ → %40/);
  assert.match(r.text, /\/ → %2F/);
  assert.deepEqual(pieces(password, r.text), []);

  // The same through the real command: serve and store copy refuse before anything is opened.
  const dir = tmpDir(t);
  const cfg = join(dir, 'config.yaml');
  writeFileSync(cfg, `store: "${url}"\ndata_dir: ${join(dir, 'data')}\n`);
  const serve = await runCli(['serve', '--config', cfg]);
  assert.equal(serve.code, 2, serve.stderr);
  assert.match(serve.stderr, /config\.yaml:1:8/);
  assert.match(serve.stderr, /%40/);
  assert.deepEqual(pieces(password, serve.stdout + serve.stderr), [], serve.stderr);
  writeFileSync(cfg, `data_dir: ${join(dir, 'data')}\n`);
  const copy = await runCli(['store', 'copy', '--to', url, '--config', cfg]);
  assert.equal(copy.code, 2, copy.stderr);
  assert.match(copy.stderr, /--to must be a postgres:\/\/ URL .*more than one @/);
  assert.deepEqual(pieces(password, copy.stdout + copy.stderr), [], copy.stderr);
});

test('passwords with @ : / ? # % and spaces, written raw, half encoded and encoded: each refused or read whole, and nothing shown holds 3 characters of one', async () => {
  const port = await closedPort();
  const all = passwords(400);
  let refused = 0;
  let reached = 0;
  for (const [i, pw] of all.entries()) {
    const encoded = encodeURIComponent(pw);
    const spellings = {
      raw: `postgres://switchyard:${pw}@127.0.0.1:${port}/switchyard`,
      'only @ encoded': `postgres://switchyard:${pw.replaceAll('@', '%40')}@127.0.0.1:${port}/switchyard`,
      'only / encoded': `postgres://switchyard:${pw.replaceAll('/', '%2F')}@127.0.0.1:${port}/switchyard`,
      'as the user': `postgres://${pw}:x@127.0.0.1:${port}/switchyard`,
      'socket, raw': `postgres://switchyard:${pw}@/switchyard?host=/run/postgresql`,
      'in the database name': `postgres://switchyard@127.0.0.1:${port}/${pw}`,
      encoded: `postgres://switchyard:${encoded}@127.0.0.1:${port}/switchyard`,
      'socket, encoded': `postgres://switchyard:${encoded}@/switchyard?host=/run/postgresql&port=${port}`,
    };
    for (const [how, url] of Object.entries(spellings)) {
      const r = load(url);
      if (how !== 'in the database name' || r.refused) assert.deepEqual(pieces(pw, r.text), [], `${how}: ${JSON.stringify(pw)} -> ${r.text}`);
      if (r.refused) {
        refused++;
        assert.match(r.where!, /^c\.yaml:1:\d+$/);
        assert.doesNotMatch(r.text, /unreadable/);
        continue;
      }
      // Taken: every parser reads the same password (no piece of it went to the host or the database).
      const read = readStoreUrl(url);
      assert.ok(read.ok);
      if (how === 'encoded') assert.equal(read.url.display, `postgres://127.0.0.1:${port}/switchyard`);
      if (how === 'encoded' || how === 'raw')
        assert.equal(new URL(url).password === '' ? '' : decodeURIComponent(new URL(url).password), pw, `${how}: read whole`);
    }
    // A clean spelling of any password is taken.
    assert.equal(load(spellings.encoded).refused, false, JSON.stringify(pw));
    assert.equal(load(spellings['socket, encoded']).refused, false, JSON.stringify(pw));
    // Raw, only a password without @ / ? # % and spaces may be taken (a : is read alike by all).
    if (/[@/?#% ]/.test(pw)) assert.equal(load(spellings.raw).refused, true, JSON.stringify(pw));
    // The store's own message when the server is not there: shown without a piece of the password.
    if (i < 12) {
      try {
        await (await connectStore(tmpDir(undefined), { url: spellings.encoded, migrations: allMigrations() })).close();
        assert.fail('nothing listens there');
      } catch (e) {
        const text = `${(e as Error).message} ${(e as SwitchyardError).hint ?? ''}`;
        assert.match(text, new RegExp(`cannot reach the store at postgres://127\\.0\\.0\\.1:${port}/switchyard`));
        assert.deepEqual(pieces(pw, text), [], text);
        reached++;
      }
    }
  }
  assert.ok(refused > 400, `most raw spellings are refused (${refused})`);
  assert.equal(reached, 12);
});

test('URLs the parsers read differently are refused; clean ones, IPv6 and the socket forms are taken and shown without credentials or parameters', () => {
  const refusedFor: Record<string, RegExp> = {
    'postgres://u:pw@h1/x@h2/db': /more than one @/,
    'postgres://u:5432/db?x@host/db': /@ after a \/ or \?/,
    'postgres://u:12#ss@h/db': /#/,
    'postgres://u:pa ss@h/db': /space/,
    'postgres://u:100%@h/db': /%XX/,
    'postgres://u:p@h1:5432,h2:5432/db': /several hosts/,
    'postgres://u:p@h/d%2Fb': /database name/,
    'postgres://u:p@h/db?host=/a+b': /\+/,
    'postgres://u:p@:5432/db?host=/run/postgresql': /port but no host/,
    'postgres://u:p@/db': /names no host/,
    'postgres://u:p@h:99999/db': /port outside/,
    'mysql://u:p@h/db': /uses mysql:/,
    'p4ssw0rdXY://u:p@h/db': /does not start with postgres:\/\//,
  };
  for (const [url, why] of Object.entries(refusedFor)) {
    const r = load(url);
    assert.equal(r.refused, true, url);
    assert.match(r.text, why, url);
  }
  assert.doesNotMatch(load('p4ssw0rdXY://u:p@h/db').text, /p4ssw0rd/, 'an unknown scheme is not repeated (it may be a password)');
  const shown: Record<string, string> = {
    'postgresql://u:p%40ss@db.internal:5432/switchyard?sslmode=require&password=zz': 'postgres://db.internal:5432/switchyard',
    'postgres://u:pa:ss@h/db': 'postgres://h/db',
    'postgres://u:p@[::1]:5433/db': 'postgres://[::1]:5433/db',
    'postgres://u:p@/db?host=/run/postgresql': 'postgres:///db?host=/run/postgresql',
    'postgres://u:p@/db?host=/run/postgresql&port=5433&password=zz': 'postgres:///db?host=/run/postgresql&port=5433',
    'postgres:///db?host=/run/postgresql': 'postgres:///db?host=/run/postgresql',
    'postgres://u:p@%2Frun%2Fpostgresql:5433/db': 'postgres:///db?host=/run/postgresql&port=5433',
    'postgres://u:p@ignored/db?host=db2.internal': 'postgres://db2.internal/db',
  };
  for (const [url, display] of Object.entries(shown)) {
    assert.equal(load(url).refused, false, url);
    assert.equal(displayStoreUrl(url), display, url);
  }
  assert.equal(displayStoreUrl('postgres://u:s3cr3t@pr0d/2026@h/db'), 'postgres://(unreadable URL)');
});

test("libpq's Unix-socket form reaches a real PostgreSQL on its socket (no TCP), shown without credentials", async (t) => {
  const pg = await postgresFor(t, { socket: true });
  if (!pg) return;
  const dir = pg.socketDir!;
  for (const url of [
    `postgres://postgres:Zk9Wq2Lp@/postgres?host=${dir}&port=${pg.port}`,
    `postgres://postgres:Zk9Wq2Lp@${encodeURIComponent(dir)}:${pg.port}/postgres`,
  ]) {
    assert.equal(load(url).refused, false, 'the configuration takes it');
    const store = await connectStore(tmpDir(t), { url, migrations: allMigrations() });
    try {
      assert.equal(store.engine, 'postgres');
      assert.equal(store.file, `postgres:///postgres?host=${dir}&port=${pg.port}`);
      assert.doesNotMatch(store.file, /Zk9Wq2Lp|postgres:Zk/);
      const conn = (await sql.get<{ local: boolean; client_port: number }>(
        store,
        'SELECT client_addr IS NULL AS local, client_port FROM pg_stat_activity WHERE pid = pg_backend_pid()',
      ))!;
      assert.equal(conn.local, true, 'the connection came over the socket');
      assert.equal(conn.client_port, -1, 'a Unix socket has no client port');
      assert.equal(await sql.value(store, 'SELECT count(*) FROM schema_migrations'), 6, 'migrated through it');
    } finally {
      await store.close();
    }
  }
  // Nothing listens on that socket directory at another port: the message shows the socket form.
  try {
    await (await connectStore(tmpDir(t), { url: `postgres://postgres:Zk9Wq2Lp@/postgres?host=${dir}&port=1` })).close();
    assert.fail('no socket for port 1');
  } catch (e) {
    assert.match((e as Error).message, new RegExp(`cannot reach the store at postgres:///postgres\\?host=${dir}&port=1`));
    assert.doesNotMatch((e as Error).message, /Zk9Wq2Lp/);
  }
});
