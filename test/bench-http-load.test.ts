/**
 * The benchmarks' lean load client (scripts/bench/http-load.ts): it must find where each answer
 * ends (Content-Length, chunked, bodiless) and count only 200s, or its figures mean nothing.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { parseAnswer, runLoad, runPaced } from '../scripts/bench/http-load.ts';

const b = (s: string) => Buffer.from(s, 'latin1');

describe("the benchmarks' load client", () => {
  it('finds the end of an answer by Content-Length, by chunks, or at its head, and waits for the rest', () => {
    const sized = 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello';
    assert.deepEqual(parseAnswer(b(sized + 'HTTP/1.1 ...')), { end: sized.length, status: 200 });
    assert.equal(parseAnswer(b(sized.slice(0, -1))), null);
    assert.equal(parseAnswer(b('HTTP/1.1 200 OK\r\nContent-Le')), null);
    const chunked = 'HTTP/1.1 404 Not Found\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n3\r\n!!!\r\n0\r\n\r\n';
    assert.deepEqual(parseAnswer(b(chunked + 'HTTP')), { end: chunked.length, status: 404 });
    assert.equal(parseAnswer(b(chunked.slice(0, -2))), null);
    assert.equal(parseAnswer(b(chunked.slice(0, 60))), null);
    const bodiless = 'HTTP/1.1 204 No Content\r\nDate: x\r\n\r\n';
    assert.deepEqual(parseAnswer(b(bodiless + 'HTTP')), { end: bodiless.length, status: 204 });
    assert.throws(() => parseAnswer(b('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n')), /malformed chunk/);
  });

  it('keeps the connections busy against a real server and counts what it answered, errors apart', async (t) => {
    let served = 0;
    const server = http.createServer((req, res) => {
      served++;
      // Every tenth answer is a 500, some are chunked: the client must count them right.
      if (served % 10 === 0) res.writeHead(500).end('no');
      else if (served % 3 === 0) {
        res.write('chu'); // no length known: chunked
        res.end('nk');
      } else res.writeHead(200, { 'content-length': '2' }).end('ok');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    t.after(() => server.close());
    const { port } = server.address() as AddressInfo;
    const result = await runLoad(`http://127.0.0.1:${port}/x?y=1`, 0.3, 4);
    assert.ok(served > 100, `served ${served}`);
    assert.equal(result.errors, Math.floor(served / 10));
    assert.equal(result.answered, served - result.errors);
    assert.ok(result.rps <= result.answered / 0.3 && result.rps > result.answered / 0.6, `${result.rps} req/s for ${result.answered} answers in 0.3 s`);
    assert.ok(result.p50 > 0 && result.p99 >= result.p50);
  });

  it('counts a connection the server closes before the time is up as an error', async (t) => {
    let served = 0;
    const server = http.createServer((req, res) => {
      // The fifth request on the server closes its connection instead of answering.
      if (++served === 5) return req.socket.destroy();
      res.end('ok');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    t.after(() => server.close());
    const { port } = server.address() as AddressInfo;
    const result = await runLoad(`http://127.0.0.1:${port}/`, 0.2, 1);
    assert.equal(result.errors, 1);
    assert.equal(result.answered, 4, 'the one connection ended at the fifth request');
  });

  it('paced: sends at the planned rate whatever the answers, and charges a stall to every request it held up', async (t) => {
    let served = 0;
    let stallAt = Number.POSITIVE_INFINITY;
    const server = http.createServer((req, res) => {
      served++;
      // Once, past the warm-up: the server holds its thread 300 ms (as a GC or a busy guest would).
      if (served === stallAt) {
        const until = performance.now() + 300;
        while (performance.now() < until);
      }
      res.writeHead(200, { 'content-length': '2' }).end('ok');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    t.after(() => server.close());
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    const calm = await runPaced(url, 1, 200, { warmupSeconds: 0.2 });
    assert.equal(calm.errors, 0);
    assert.equal(calm.answered, 200, 'what was planned after the warm-up, each answered once');
    assert.equal(served, 240, 'the warm-up was sent too');
    served = 0;
    stallAt = 100;
    const stalled = await runPaced(url, 1, 200, { warmupSeconds: 0.2 });
    assert.equal(stalled.answered, 200);
    // About 60 requests were planned during the stall: each waited for it from its planned time,
    // so well over 1 % of them are past 100 ms (a closed loop would count a handful at most).
    assert.ok(stalled.p99 >= 100, `p99 ${stalled.p99.toFixed(1)} ms`);
    assert.ok(calm.p99 < stalled.p99);
  });
});
