/**
 * Hostile integrations (test/fixtures/hostile/). For each attack: a well-behaved integration keeps
 * answering while it runs, the attack is stopped by the limit meant for it (not by a later one,
 * which is how "within its limit" is checked without timing), and the logs say why. Durations are
 * printed as diagnostics.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it, type TestContext } from 'node:test';
import type { InvocationResult } from '../src/sandbox/index.ts';
import { bodyText, call, fetchScript, fixture, localServer, testSandbox, type TestSandbox } from './sandbox.helpers.ts';

const limits = {
  cpu_time: 100,
  wall_time: 1500,
  memory_mb: 24,
  subrequests: 5,
  response_body: 64 * 1024,
  startup_time: 1000,
  wait_until: 300,
  log_lines: 20,
};

const bystander = fixture('well-behaved.js');
const bystanderEnv = { secrets: { token: 'bystander-secret-token' } };

type Result = Awaited<ReturnType<typeof call>>;

/** Run an attack while the bystander is called in a loop; both outcomes come back. */
async function underAttack(t: TestContext, sb: TestSandbox, attack: () => Promise<Result>): Promise<{ attack: Result; bystanders: Result[] }> {
  const bystanders: Result[] = [];
  let attacking = true;
  const loop = (async () => {
    while (attacking) {
      bystanders.push(await call(sb, bystander, { environment: bystanderEnv }));
      await new Promise((r) => setTimeout(r, 10));
    }
  })();
  const started = performance.now();
  const result = await attack();
  attacking = false;
  await loop;
  bystanders.push(await call(sb, bystander, { environment: bystanderEnv }));
  t.diagnostic(
    `attack answered ${result.status} after ${Math.round(performance.now() - started)} ms (cpu ${result.cpuMs.toFixed(1)} ms); bystander answered ${bystanders.length} times meanwhile`,
  );
  for (const b of bystanders) {
    assert.equal(b.status, 200, `bystander: ${b.text}`);
    assert.deepEqual(b.json(), { hello: 'world', clean: true, secret: 'bystander-secret-token' });
  }
  return { attack: result, bystanders };
}

function assertStoppedBy(r: InvocationResult, limit: string): void {
  assert.equal(r.status, 503, bodyText(r.body));
  assert.equal(r.error?.kind, 'limit');
  assert.equal(r.error?.limit, limit, r.error?.message);
  assert.ok(
    r.logs.some((l) => l.level === 'error' && l.message.startsWith(`limit ${limit}: `) && l.message.includes(`sandbox.${limit}`)),
    JSON.stringify(r.logs),
  );
}

describe('hostile integrations', () => {
  let sb: TestSandbox;
  const cleanup: Array<() => unknown> = [];
  // One sandbox for the whole suite, like a server that keeps running through every attack.
  before(() => {
    sb = testSandbox({ after: (fn: () => unknown) => cleanup.push(fn) } as unknown as TestContext, { limits });
  });
  after(async () => {
    for (const fn of cleanup) await fn();
  });

  it('an infinite loop is stopped by the CPU limit', async (t) => {
    const { attack } = await underAttack(t, sb, () => call(sb, fixture('infinite-loop.js')));
    assertStoppedBy(attack, 'cpu_time');
    assert.equal(attack.logs[0].message, 'spinning');
  });

  it('a loop after an await (beyond isolated-vm timeouts) is stopped by the CPU watchdog', async (t) => {
    const { attack } = await underAttack(t, sb, () => call(sb, fixture('loop-after-await.js')));
    assertStoppedBy(attack, 'cpu_time');
    assert.equal(attack.logs[0].message, 'awaited; spinning');
  });

  it('a memory bomb is stopped by the memory limit, and the worker survives', async (t) => {
    // With 100 ms of CPU a bomb is often stopped by the CPU limit first; give it room to show the heap limit.
    const roomy = testSandbox(t, { limits: { ...limits, cpu_time: 5000, wall_time: 10_000 } });
    const { attack } = await underAttack(t, roomy, () => call(roomy, fixture('memory-bomb.js')));
    assertStoppedBy(attack, 'memory_mb');
    assert.equal((await call(roomy, fixture('memory-bomb.js'))).error?.limit, 'memory_mb');
  });

  it('string doubling ends in a 5xx that says why', async (t) => {
    const { attack } = await underAttack(t, sb, () => call(sb, fixture('string-doubling.js')));
    assert.ok(attack.status >= 500);
    assert.ok(
      attack.error?.limit === 'memory_mb' || attack.error?.limit === 'cpu_time' || /Invalid string length/.test(attack.error?.message ?? ''),
      attack.error?.message,
    );
    assert.notEqual(attack.error?.limit, 'wall_time');
    assert.ok(attack.logs.some((l) => l.level === 'error'));
  });

  it('a rejection left unhandled with the text of a limit is logged as such, not taken for a limit', async () => {
    for (const text of ['Isolate was disposed during execution due to memory limit', 'Script execution timed out.']) {
      const s = fetchScript(`Promise.reject(new Error(${JSON.stringify(text)})); await null; return new Response('answered');`);
      for (let n = 0; n < 2; n++) {
        const r = await call(sb, s);
        assert.equal(r.status, 200, `${text}: ${r.error?.kind}: ${r.error?.message}`);
        assert.equal(r.text, 'answered');
        assert.equal(r.error, undefined);
        assert.ok(
          r.logs.some((l) => l.level === 'error' && l.message.startsWith(`Uncaught (in promise) Error: ${text}`)),
          JSON.stringify(r.logs),
        );
      }
    }
  });

  it('deep recursion is a caught RangeError answered 500', async (t) => {
    const { attack } = await underAttack(t, sb, () => call(sb, fixture('deep-recursion.js')));
    assert.equal(attack.status, 500);
    assert.equal(attack.error?.kind, 'exception');
    assert.match(attack.error?.message ?? '', /Maximum call stack size exceeded/);
  });

  it('a microtask flood is stopped by the CPU limit', async (t) => {
    const { attack } = await underAttack(t, sb, () => call(sb, fixture('promise-flood.js')));
    assertStoppedBy(attack, 'cpu_time');
  });

  it('a timer flood is refused after 10 000 host operations', async (t) => {
    // Enough CPU that the operation cap, not the CPU limit, is what stops it on a busy machine.
    const roomy = testSandbox(t, { limits: { ...limits, cpu_time: 2000 } });
    const { attack } = await underAttack(t, roomy, () => call(roomy, fixture('timer-flood.js')));
    assert.equal(attack.status, 200);
    assert.equal(attack.text, 'made 10000 timers');
    assert.match(attack.logs[0].message, /timers refused after 10000: too many host operations in one invocation/);
  });

  it('a sub-request flood is stopped by the sub-request limit before more than 5 requests leave', async (t) => {
    const target = await localServer(t, (_req, res) => setTimeout(() => res.end('ok'), 50));
    const { attack } = await underAttack(t, sb, () => call(sb, fixture('subrequest-flood.js'), { url: `https://x.test/?target=${target.url}/` }));
    assertStoppedBy(attack, 'subrequests');
    await new Promise((r) => setTimeout(r, 100));
    assert.ok(target.hits.length <= limits.subrequests, `${target.hits.length} requests left the sandbox`);
  });

  it('a huge response is stopped by the response body limit', async (t) => {
    const { attack } = await underAttack(t, sb, () => call(sb, fixture('huge-response.js'), { url: `https://x.test/?size=${limits.response_body + 1}` }));
    assertStoppedBy(attack, 'response_body');
    const fits = await call(sb, fixture('huge-response.js'), { url: `https://x.test/?size=${limits.response_body}` });
    assert.equal(fits.status, 200);
    assert.equal(Buffer.byteLength(fits.body), limits.response_body);
  });

  it('a handler that never answers is stopped by the wall-clock limit', async (t) => {
    const { attack } = await underAttack(t, sb, () => call(sb, fixture('wall-clock.js')));
    assertStoppedBy(attack, 'wall_time');
  });

  it('a script spinning at its top level is not loaded (startup_time)', async (t) => {
    const { attack } = await underAttack(t, sb, () => call(sb, fixture('slow-startup.js')));
    assertStoppedBy(attack, 'startup_time');
    const checked = await sb.check(fixture('slow-startup.js', 'slow-startup-check'));
    assert.equal(checked.ok, false);
    assert.match((checked as { error: string }).error, /sandbox\.startup_time/);
  });

  it('a log flood keeps log_lines lines and is stopped by the CPU limit', async (t) => {
    const { attack } = await underAttack(t, sb, () => call(sb, fixture('log-flood.js')));
    assertStoppedBy(attack, 'cpu_time');
    assert.equal(attack.logs.length, limits.log_lines + 2);
    assert.match(attack.logs[limits.log_lines].message, /log output truncated/);
  });

  it('waitUntil work past wait_until is stopped after the response, and the logs say so', async (t) => {
    const { attack } = await underAttack(t, sb, () => call(sb, fixture('waituntil-forever.js')));
    assert.equal(attack.status, 200);
    assert.equal(attack.text, 'answered');
    let late: string[] = [];
    for (let i = 0; i < 200 && !late.some((m) => m.startsWith('limit wait_until')); i++) {
      await new Promise((r) => setTimeout(r, 10));
      late = sb.late.filter((e) => e.requestId === attack.requestId).map((e) => e.line.message);
    }
    assert.equal(late[0], 'still working after the response');
    assert.match(late.at(-1)!, /^limit wait_until: .*sandbox\.wait_until = 300 ms/);
  });

  it('finds no way to the host: no process, require, import(), Node globals, bridge or host frames', async (t) => {
    const { attack } = await underAttack(t, sb, () => call(sb, fixture('reach-host.js')));
    assert.equal(attack.status, 200, attack.text);
    assert.deepEqual(attack.json(), {
      sameGlobal: true,
      process: false,
      require: false,
      module: false,
      Buffer: false,
      bootFunction: false,
      WebAssembly: false,
      SharedArrayBuffer: false,
      dynamicImportError: 'Not supported',
      hostFrames: 0,
      globals: [],
    });
  });

  it('cannot load a script that imports node:fs', async (t) => {
    const { attack } = await underAttack(t, sb, () => call(sb, fixture('import-node-fs.js')));
    assert.equal(attack.status, 500);
    assert.equal(attack.error?.kind, 'load');
    assert.match(attack.error?.message ?? '', /imports "node:fs"/);
  });

  it('prototype pollution stays inside the polluting integration', async (t) => {
    // The polluter breaks its own world (even the runtime's Headers use Array.prototype.push) ...
    const { attack } = await underAttack(t, sb, async () => {
      await call(sb, fixture('prototype-pollution.js'));
      return call(sb, fixture('prototype-pollution.js'));
    });
    assert.equal(attack.status, 500);
    assert.match(attack.error?.message ?? '', /poisoned/);
    // ... and the bystander (checked inside underAttack) never sees any of it.
  });

  it("cannot read another integration's secrets", async (t) => {
    const api = await localServer(t, (_req, res) => {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end('{"error":"not found"}');
    });
    const spy = testSandbox(t, { limits, serverOrigin: api.url });
    // The bystander runs first in the same sandbox, so its secret is somewhere in the worker.
    assert.equal((await call(spy, bystander, { environment: bystanderEnv })).status, 200);
    await call(spy, fixture('prototype-pollution.js'));
    const r = await call(spy, fixture('secrets-reader.js'), { environment: { apiEndpoint: `${api.url}/api/v1`, apiTokens: { installation: 'spy-token' } } });
    assert.equal(r.status, 200, r.text);
    assert.doesNotMatch(r.text, /bystander-secret-token/);
    assert.match(r.text, /stash: undefined/);
    assert.match(r.text, /api \.\.\/\.\.\/integrations\/other refused: context\.api: "\.\.\/\.\.\/integrations\/other" is outside/);
    assert.match(r.text, /api %2e%2e\/%2e%2e\/admin refused/);
    assert.match(r.text, /api installations\/\.\.\/\.\.\/\.\.\/admin refused/);
    assert.match(r.text, new RegExp(`fetch ${api.url}/api/v1/integrations refused: fetch: ${api.url} is this server`));
    assert.match(r.text, /fetch http:\/\/localhost:\d+\/api\/v1\/integrations refused: .*is this server/);
    assert.equal(api.hits.length, 0);
  });

  it('cannot reach or forge what the runtime hands the host (prototype setters on array indexes)', async (t) => {
    const { attack } = await underAttack(t, sb, () => call(sb, fixture('outbox-injection.js')));
    // The setters never saw the outbox: nothing was forged, the script's own answer and line arrived
    // (a forged entry would end the invocation as malformed), and the worker lives (the bystander
    // answered throughout).
    assert.equal(attack.status, 200, `${attack.error?.kind}: ${attack.error?.message}`);
    assert.match(attack.text, /^caught \d+$/);
    assert.ok(
      attack.logs.some((l) => l.message === 'a line for the outbox'),
      JSON.stringify(attack.logs),
    );
    const again = await call(sb, bystander, { environment: bystanderEnv });
    assert.equal(again.status, 200);
  });

  it('tampering with the runtime or answering nonsense only hurts the tamperer', async (t) => {
    const s = fixture('tamper-runtime.js');
    const mode = (m: string) => call(sb, s, { url: `https://x.test/?mode=${m}` });
    const { attack } = await underAttack(t, sb, () => mode('not-a-response'));
    assert.equal(attack.status, 500);
    assert.match(attack.error?.message ?? '', /must return a Response, got Object/);
    const thrown = await mode('throw-string');
    assert.equal(thrown.status, 500);
    assert.match(thrown.error?.message ?? '', /non-Error value was thrown: a string/);
    assert.deepEqual([(await mode('getter')).status, (await mode('getter')).text], [200, 'x']);
    const unhandled = await mode('unhandled');
    assert.equal(unhandled.text, 'fine');
    assert.equal((await mode('ok')).text, 'ok');
    assert.equal((await mode('runtime')).text, 'frozen: TypeError');
  });
});
