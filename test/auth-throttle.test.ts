/**
 * Failed authentication is throttled per client address: after 10 wrong tokens in a minute the
 * address gets 429 with Retry-After, even with the right token, until its window ends; other
 * addresses are not affected; the console login counts against the same budget.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { AUTH_FAILURES_ALLOWED, authThrottleShare, clientAddress, createAuthThrottle } from '../src/http/throttle.ts';
import { parseConfigText } from '../src/config/index.ts';
import { join } from 'node:path';
import { ROOT, startTestServer } from './helpers/index.ts';
import { knownSecretEqual } from '../src/http/auth.ts';

/** GET /api/v1/installations with `token`, from a given local address (127.0.0.0/8 is all loopback). */
function get(
  url: string,
  token: string,
  localAddress = '127.0.0.1',
  headers: Record<string, string> = {},
  path = '/api/v1/installations',
): Promise<{ status: number; retryAfter?: string; body: any }> {
  return new Promise((resolve, reject) => {
    const req = http.get(`${url}${path}`, { headers: { authorization: `Bearer ${token}`, ...headers }, localAddress, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode!, retryAfter: res.headers['retry-after'], body: JSON.parse(text) }));
    });
    req.on('error', reject);
  });
}

test('wrong tokens from one address: 401 ten times, then 429 with Retry-After until the window ends', async (t) => {
  const s = await startTestServer(t, { integrations_dir: join(ROOT, 'integrations') });
  let clock = 1_800_000_000_000;
  s.services.authThrottle = createAuthThrottle({ now: () => clock });
  const created = await s.api('POST', '/api/v1/installations', {
    integration: 'webhook',
    configuration: { webhook_url: 'https://hooks.example.test/x', event_types: 'site_view' },
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  for (let i = 0; i < 10; i++) assert.equal((await get(s.url, 'wrong-token')).status, 401, `attempt ${i + 1}`);
  const blocked = await get(s.url, s.token);
  assert.equal(blocked.status, 429, 'the right token waits too: nothing is compared while blocked');
  assert.equal(blocked.retryAfter, '60');
  assert.equal(blocked.body.error.code, 'too_many_requests');
  assert.match(blocked.body.error.message, /too many failed authentication attempts from 127\.0\.0\.1; try again in 60 s/);
  assert.equal((await get(s.url, s.token, '127.0.0.2')).status, 200, 'another address is not affected');
  // Installation (and invocation) tokens cannot be guessed: they are checked first and never
  // throttled, so integrations calling the API from the server's own address keep working.
  const own = await get(s.url, created.body.token, '127.0.0.1', {}, `/api/v1/installations/${created.body.installation.id}`);
  assert.equal(own.status, 200, 'an installation token passes while the address is blocked');
  assert.ok(
    s.logs.some((l) => /too many wrong tokens/.test(String(l.msg ?? l.message))),
    'the block is logged',
  );
  assert.ok(!JSON.stringify(s.logs).includes('wrong-token'), 'the tokens tried are not logged');

  clock += 30_000;
  const later = await get(s.url, s.token);
  assert.equal(later.status, 429);
  assert.equal(later.retryAfter, '30');
  clock += 30_000;
  assert.equal((await get(s.url, s.token)).status, 200, 'a new window');
});

test('behind a proxy (server.trust_proxy) the client is the X-Forwarded-For entry the proxy added (counted from the right); IPv6 counts by /64', async (t) => {
  const s = await startTestServer(t, { server: { trust_proxy: 1 } });
  // nginx appends the peer it heard from: the rightmost entry is its word, the rest the client's.
  for (let i = 0; i < 10; i++) assert.equal((await get(s.url, 'wrong-token', '127.0.0.1', { 'x-forwarded-for': `198.51.100.${i}, 203.0.113.7` })).status, 401);
  assert.equal((await get(s.url, s.token, '127.0.0.1', { 'x-forwarded-for': '203.0.113.7' })).status, 429, 'a spoofed first entry does not escape the block');
  assert.equal((await get(s.url, s.token, '127.0.0.1', { 'x-forwarded-for': '203.0.113.7, 203.0.113.8' })).status, 200, 'another client behind the same proxy');
  assert.equal((await get(s.url, s.token, '127.0.0.1', { 'x-forwarded-for': '198.51.100.1' })).status, 200, 'a client cannot lock out an address it names');

  const req = (ip: string, xff?: string) => Object.assign(new Request('http://x/', { headers: xff ? { 'x-forwarded-for': xff } : {} }), { ip });
  assert.equal(clientAddress(req('2001:db8:1:2:a::1')), clientAddress(req('2001:0db8:0001:0002:ffff:1:2:3')));
  assert.equal(clientAddress(req('2001:db8:1:2:a::1')), '2001:db8:1:2::/64');
  assert.notEqual(clientAddress(req('2001:db8:1:2::1')), clientAddress(req('2001:db8:1:3::1')));
  assert.equal(clientAddress(req('::ffff:192.0.2.1')), '192.0.2.1');
  assert.equal(clientAddress(req('::ffff:c000:201')), '192.0.2.1', 'one spelling per address');
  assert.equal(clientAddress(req('127.0.0.1', '198.51.100.1')), '127.0.0.1', 'X-Forwarded-For is ignored unless trusted');
  assert.equal(clientAddress(req('127.0.0.1', '198.51.100.1'), 1), '198.51.100.1');
  assert.equal(clientAddress(req('127.0.0.1', '6.6.6.6, 198.51.100.1, 10.0.0.2'), 2), '198.51.100.1', 'two proxies: the second entry from the right');
  assert.equal(clientAddress(req('127.0.0.1', '198.51.100.1'), 3), '198.51.100.1', 'fewer entries than proxies: the leftmost');
});

test('server.trust_proxy takes true, false or a number of proxies, and refuses anything else with its path', () => {
  const load = (v: string) => parseConfigText(`server:\n  trust_proxy: ${v}\n`, 'c.yaml', {});
  assert.equal(load('true').server.trust_proxy, 1);
  assert.equal(load('false').server.trust_proxy, 0);
  assert.equal(load('2').server.trust_proxy, 2);
  assert.throws(
    () => load('-1'),
    (e: any) => /c\.yaml:2:16/.test(JSON.stringify(e.problems)) && /server\.trust_proxy: must be true, false or a number/.test(JSON.stringify(e.problems)),
  );
  assert.throws(() => load('"all"'));
});

test('the console login counts against the same budget', async (t) => {
  const s = await startTestServer(t);
  s.services.authThrottle = createAuthThrottle({ max: 3 });
  const login = (token: string) =>
    fetch(`${s.consoleUrl}/console/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-switchyard-console': 'login' },
      body: JSON.stringify({ token }),
    });
  for (let i = 0; i < 2; i++) assert.equal((await login('nope')).status, 401);
  assert.equal((await get(s.url, 'nope')).status, 401);
  const refused = await login(s.token);
  assert.equal(refused.status, 429);
  assert.ok(Number(refused.headers.get('retry-after')) > 0);
  assert.equal((await get(s.url, s.token)).status, 429);
});

test('N serving processes, each with its share: a guesser who always finds a process still answering gets 10 wrong tokens a minute in all, for any N', () => {
  for (const n of [1, 2, 3, 4, 6, 7, 9, 10, 11, 16, 32]) {
    let clock = 1_800_000_000_000;
    const processes = Array.from({ length: n }, () => createAuthThrottle({ ...authThrottleShare(n), now: () => clock }));
    // Every two seconds for half an hour, the guesser tries every process (its connections land
    // anywhere) and each one that does not refuse takes a wrong token.
    const answered: number[] = [];
    const minutes = 30;
    for (let second = 0; second < minutes * 60; second += 2, clock += 2000) {
      for (const p of processes) {
        try {
          p.check('198.51.100.7');
        } catch {
          continue;
        }
        p.fail('198.51.100.7');
        answered.push(second);
      }
    }
    // In the long run: the budget per minute, never N times it or a rounded-up share of it.
    assert.ok(answered.length <= AUTH_FAILURES_ALLOWED * minutes + n, `${n} processes: ${answered.length} wrong tokens answered in ${minutes} minutes`);
    // At first: the whole budget at most, as long as each process can be given a whole guess.
    if (n <= AUTH_FAILURES_ALLOWED)
      assert.ok(answered.filter((s) => s < 60).length <= AUTH_FAILURES_ALLOWED, `${n} processes, first minute: ${answered.filter((s) => s < 60).length}`);
  }
});

test('the admin token comparison: its digest made once per token value, a new value compared as new', () => {
  const equal = knownSecretEqual();
  assert.equal(equal('sy_admin_one', 'sy_admin_one'), true);
  assert.equal(equal('sy_admin_on', 'sy_admin_one'), false);
  assert.equal(equal('sy_admin_one ', 'sy_admin_one'), false);
  // The token changed (a configuration reload): the old one no longer matches.
  assert.equal(equal('sy_admin_one', 'sy_admin_two'), false);
  assert.equal(equal('sy_admin_two', 'sy_admin_two'), true);
  assert.equal(equal('', 'sy_admin_two'), false);
});

test('a client address is keyed the same however often it is asked, for IPv4, mapped IPv4 and IPv6', () => {
  const req = (ip: string) => Object.assign(new Request('http://x/'), { ip });
  for (let i = 0; i < 2; i++) {
    assert.equal(clientAddress(req('127.0.0.1')), '127.0.0.1');
    assert.equal(clientAddress(req('::ffff:127.0.0.1')), '127.0.0.1');
    assert.equal(clientAddress(req('2001:db8:1:2:3:4:5:6')), '2001:db8:1:2::/64');
    assert.equal(clientAddress(req('not an address')), 'not an address');
  }
});
