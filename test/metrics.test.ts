/** GET /metrics: the Prometheus text format, the admin token, and values that follow what happened. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRegistry } from '../src/metrics/index.ts';
import { VERSION } from '../src/version.ts';
import { waitFor } from './helpers/index.ts';
import { inspectionServer, receiver } from './inspection-support.ts';

/** Every line of the exposition format is a comment (HELP/TYPE) or `name{labels} value`. */
function parse(text: string): Map<string, number> {
  assert.ok(text.endsWith('\n'));
  const samples = new Map<string, number>();
  const types = new Map<string, string>();
  for (const line of text.trimEnd().split('\n')) {
    const meta = /^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$/.exec(line);
    if (meta) {
      if (meta[1] === 'TYPE') {
        assert.match(meta[3], /^(counter|gauge|histogram)$/);
        types.set(meta[2], meta[3]);
      }
      continue;
    }
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*\})? (-?[0-9.e+-]+|\+Inf|NaN)$/.exec(line);
    assert.ok(m, `not a sample line: ${line}`);
    const family = m[1].replace(/_(bucket|sum|count)$/, '');
    assert.ok(types.has(m[1]) || types.has(family), `sample ${m[1]} has no TYPE line before it`);
    samples.set(`${m[1]}${m[2] ?? ''}`, Number(m[3] === '+Inf' ? Infinity : m[3]));
  }
  return samples;
}

test('the registry writes valid exposition text: escaped labels, cumulative buckets, _sum and _count', () => {
  const r = createRegistry();
  const c = r.counter('demo_requests', 'Requests\nwith a newline in help');
  c.inc({ route: '/a"b\\c' });
  c.inc({ route: '/a"b\\c' }, 2);
  const h = r.histogram('demo_seconds', 'Durations', [0.1, 1, 0.5]);
  for (const v of [0.05, 0.2, 0.7, 3]) h.observe(v);
  r.gauge('demo_depth', 'Depth', () => [[{ state: 'pending' }, 4]]);
  r.gauge('demo_broken', 'Throws', () => {
    throw new Error('store closed');
  });
  const text = r.render();
  const s = parse(text);
  assert.match(text, /# HELP demo_requests_total Requests\\nwith a newline in help\n# TYPE demo_requests_total counter\n/);
  assert.equal(s.get('demo_requests_total{route="/a\\"b\\\\c"}'), 3);
  assert.equal(s.get('demo_seconds_bucket{le="0.1"}'), 1);
  assert.equal(s.get('demo_seconds_bucket{le="0.5"}'), 2);
  assert.equal(s.get('demo_seconds_bucket{le="1"}'), 3);
  assert.equal(s.get('demo_seconds_bucket{le="+Inf"}'), 4);
  assert.equal(s.get('demo_seconds_count'), 4);
  assert.ok(Math.abs(s.get('demo_seconds_sum')! - 3.95) < 1e-9);
  assert.equal(s.get('demo_depth{state="pending"}'), 4);
  assert.doesNotMatch(text, /demo_broken/, 'a gauge that cannot be read is left out, the rest still answers');
});

test('GET /metrics needs the admin token and reports queue, attempts, latency, sandbox faults and HTTP requests', async (t) => {
  const s = await inspectionServer(t, { webhooks: { max_retries: 1, base_delay: 50 } });
  const anon = await fetch(`${s.url}/metrics`);
  assert.equal(anon.status, 401);
  const inst = await s.install('inspector');
  const installationToken = (await s.api('POST', `/api/v1/installations/${inst}/token`)).body.token;
  assert.equal((await fetch(`${s.url}/metrics`, { headers: { authorization: `Bearer ${installationToken}` } })).status, 403);

  const ok = await receiver(t, 200);
  const bad = await receiver(t, 500);
  await s.subscribe(ok.url, ['space_content_updated']);
  await s.subscribe(bad.url, ['space_content_updated']);
  const sent = [];
  for (const spaceId of ['fine', 'throw', 'spin']) sent.push(await s.send('space_content_updated', { spaceId, revisionId: 'r' }));
  for (const d of sent.flatMap((x) => x.deliveries)) await s.settled(d.id);
  // The throwing and the spinning handler are retried once too (max_retries 1): 5 invocations.
  await waitFor(async () => (await s.api('GET', '/api/v1/logs?integration=inspector')).body.invocations.length === 5, 15_000);
  await s.api('GET', '/api/v1/deliveries/dlv_missing');

  const res = await fetch(`${s.url}/metrics`, { headers: { authorization: `Bearer ${s.token}` } });
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('content-type'), 'text/plain; version=0.0.4; charset=utf-8');
  const m = parse(await res.text());

  // Queue depth by state (from the database).
  assert.equal(m.get('switchyard_webhook_deliveries{state="delivered"}'), 3);
  assert.equal(m.get('switchyard_webhook_deliveries{state="failed"}'), 3);
  assert.equal(m.get('switchyard_webhook_deliveries{state="pending"}'), 0);
  assert.equal(m.get('switchyard_webhook_retries_due'), 0);
  // Attempts by outcome: 3 successes; each failing delivery had a first attempt that scheduled a
  // retry, and a last one that ended it: failed.
  assert.equal(m.get('switchyard_webhook_attempts_total{outcome="success",trigger="automatic"}'), 3);
  assert.equal(m.get('switchyard_webhook_attempts_total{outcome="retry",trigger="automatic"}'), 3);
  assert.equal(m.get('switchyard_webhook_attempts_total{outcome="failed",trigger="automatic"}'), 3);
  assert.equal(m.get('switchyard_webhook_attempt_duration_seconds_count'), 9);
  assert.equal(m.get('switchyard_webhook_delivery_latency_seconds_count'), 3);
  assert.equal(m.get('switchyard_webhook_delivery_latency_seconds_bucket{le="+Inf"}'), 3);
  // Sandbox: every invocation, the exceptions and the CPU-limit breaches (each handler run twice), per integration.
  assert.equal(m.get('switchyard_sandbox_invocations_total{integration="inspector"}'), 5);
  assert.equal(m.get('switchyard_sandbox_errors_total{integration="inspector",kind="exception"}'), 2);
  assert.equal(m.get('switchyard_sandbox_errors_total{integration="inspector",kind="limit"}'), 2);
  assert.equal(m.get('switchyard_sandbox_limit_breaches_total{integration="inspector",limit="cpu_time"}'), 2);
  // HTTP by route pattern and status, refusals included.
  assert.equal(m.get('switchyard_http_requests_total{method="POST",route="/api/v1/events",status="202"}'), 3);
  assert.equal(m.get('switchyard_http_requests_total{method="GET",route="/api/v1/deliveries/:id",status="404"}'), 1);
  assert.equal(m.get('switchyard_http_requests_total{method="GET",route="/metrics",status="401"}'), 1);
  assert.equal(m.get(`switchyard_build_info{version="${VERSION}"}`), 1);
});

test('metrics.token reads GET /metrics and nothing else; a short one is a config error naming the key', async (t) => {
  const scrape = 'scrape-only-4f0c2a9d81';
  const s = await inspectionServer(t, { metrics: { token: scrape } });
  const page = await fetch(`${s.url}/metrics`, { headers: { authorization: `Bearer ${scrape}` } });
  assert.equal(page.status, 200);
  assert.match(await page.text(), /^# HELP switchyard_/m);
  assert.equal((await fetch(`${s.url}/metrics`, { headers: { authorization: `Bearer ${s.token}` } })).status, 200, 'the admin token still reads it');
  assert.equal((await fetch(`${s.url}/metrics`, { headers: { authorization: 'Bearer scrape-only-wrong-token' } })).status, 401);
  assert.equal((await s.api('GET', '/api/v1/installations', undefined, scrape)).status, 401, 'the scrape token is not an API token');

  const { parseConfigText } = await import('../src/config/index.ts');
  assert.throws(
    () => parseConfigText('metrics:\n  token: short\n', 'c.yaml', {}),
    (e: any) =>
      e.problems.some(
        (p: any) => p.where === 'c.yaml:2:10' && /metrics\.token/.test(p.message) && /at least 16 characters/.test(`${p.message} ${p.hint ?? ''}`),
      ),
  );
});
