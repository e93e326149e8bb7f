/**
 * Failed authentication is throttled per client address: after 10 wrong tokens in a minute the
 * address gets 429 with Retry-After, even with the right token, until its window ends; other
 * addresses are not affected; the console login counts against the same budget.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { createAuthThrottle } from '../src/http/throttle.ts';
import { startTestServer } from './helpers/index.ts';

/** GET /api/v1/installations with `token`, from a given local address (127.0.0.0/8 is all loopback). */
function get(url: string, token: string, localAddress = '127.0.0.1'): Promise<{ status: number; retryAfter?: string; body: any }> {
  return new Promise((resolve, reject) => {
    const req = http.get(`${url}/api/v1/installations`, { headers: { authorization: `Bearer ${token}` }, localAddress, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode!, retryAfter: res.headers['retry-after'], body: JSON.parse(text) }));
    });
    req.on('error', reject);
  });
}

test('wrong tokens from one address: 401 ten times, then 429 with Retry-After until the window ends', async (t) => {
  const s = await startTestServer(t);
  let clock = 1_800_000_000_000;
  s.services.authThrottle = createAuthThrottle({ now: () => clock });
  for (let i = 0; i < 10; i++) assert.equal((await get(s.url, 'wrong-token')).status, 401, `attempt ${i + 1}`);
  const blocked = await get(s.url, s.token);
  assert.equal(blocked.status, 429, 'the right token waits too: nothing is compared while blocked');
  assert.equal(blocked.retryAfter, '60');
  assert.equal(blocked.body.error.code, 'too_many_requests');
  assert.match(blocked.body.error.message, /too many failed authentication attempts from 127\.0\.0\.1; try again in 60 s/);
  assert.equal((await get(s.url, s.token, '127.0.0.2')).status, 200, 'another address is not affected');
  assert.ok(s.logs.some((l) => /too many wrong tokens/.test(String(l.msg ?? l.message))), 'the block is logged');
  assert.ok(!JSON.stringify(s.logs).includes('wrong-token'), 'the tokens tried are not logged');

  clock += 30_000;
  const later = await get(s.url, s.token);
  assert.equal(later.status, 429);
  assert.equal(later.retryAfter, '30');
  clock += 30_000;
  assert.equal((await get(s.url, s.token)).status, 200, 'a new window');
});

test('the console login counts against the same budget', async (t) => {
  const s = await startTestServer(t);
  s.services.authThrottle = createAuthThrottle({ max: 3 });
  const login = (token: string) =>
    fetch(`${s.url}/console/login`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-switchyard-console': 'login' }, body: JSON.stringify({ token }) });
  for (let i = 0; i < 2; i++) assert.equal((await login('nope')).status, 401);
  assert.equal((await get(s.url, 'nope')).status, 401);
  const refused = await login(s.token);
  assert.equal(refused.status, 429);
  assert.ok(Number(refused.headers.get('retry-after')) > 0);
  assert.equal((await get(s.url, s.token)).status, 429);
});
