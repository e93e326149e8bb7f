/**
 * A lean closed-loop HTTP/1.1 load client for the benchmarks: `concurrency` keep-alive connections,
 * one GET in flight on each, for `seconds`. It writes a pre-built request and reads just enough of
 * the answer to find its status and its end (Content-Length or chunked), so it spends a few µs per
 * request where Node's http client spends ~55: on a machine of two cores the client shares the CPU
 * with what it measures, and a heavy client hides the difference between the servers it compares.
 * Every answer is checked; one that is not a 200, or a connection that fails or is closed before
 * the time is up, counts as an error.
 */
import net from 'node:net';
import { percentile } from './common.ts';

export interface LoadResult {
  /** 200 answers in all. */
  answered: number;
  rps: number;
  p50: number;
  p99: number;
  errors: number;
}

const CRLFCRLF = Buffer.from('\r\n\r\n');
const ANSWER_TIMEOUT_MS = 10_000;

/** Where one answer ends in `buf` (from 0) and its status, or null while it is incomplete. */
export function parseAnswer(buf: Buffer): { end: number; status: number } | null {
  const headEnd = buf.indexOf(CRLFCRLF);
  if (headEnd < 0) return null;
  const head = buf.toString('latin1', 0, headEnd);
  const status = Number(head.slice(9, 12));
  const bodyStart = headEnd + 4;
  const length = /\r\ncontent-length:\s*(\d+)/i.exec(head);
  if (length) {
    const end = bodyStart + Number(length[1]);
    return buf.length >= end ? { end, status } : null;
  }
  if (/\r\ntransfer-encoding:[^\r]*chunked/i.test(head)) {
    let at = bodyStart;
    for (;;) {
      const lineEnd = buf.indexOf('\r\n', at);
      if (lineEnd < 0) return null;
      const size = parseInt(buf.toString('latin1', at, lineEnd), 16);
      if (Number.isNaN(size)) throw new Error('malformed chunk size in an answer');
      if (size === 0) {
        // The last chunk; no trailers expected, so the answer ends at the next empty line.
        const end = buf.indexOf(CRLFCRLF, lineEnd);
        return end < 0 ? null : { end: end + 4, status };
      }
      at = lineEnd + 2 + size + 2;
      if (buf.length < at) return null;
    }
  }
  // No length and not chunked: a bodiless answer (204, 304) ends with its head.
  return { end: bodyStart, status };
}

export async function runLoad(url: string, seconds: number, concurrency: number): Promise<LoadResult> {
  const u = new URL(url);
  if (u.protocol !== 'http:') throw new Error(`the load client speaks plain HTTP/1.1 only, not ${u.protocol} (${url})`);
  const request = Buffer.from(`GET ${u.pathname}${u.search} HTTP/1.1\r\nHost: ${u.host}\r\nConnection: keep-alive\r\nAccept: */*\r\n\r\n`, 'latin1');
  const latencies: number[] = [];
  let errors = 0;
  const started = performance.now();
  const end = started + seconds * 1000;

  const connection = () =>
    new Promise<void>((resolve) => {
      const socket = net.connect(Number(u.port || 80), u.hostname.replace(/^\[|\]$/g, ''));
      socket.setNoDelay(true);
      // A server that stops answering must not hang the benchmark.
      socket.setTimeout(ANSWER_TIMEOUT_MS, () => {
        failed = true;
        errors++;
        socket.destroy();
        resolve();
      });
      let buf: Buffer = Buffer.alloc(0);
      let t0 = 0;
      let failed = false;
      const send = () => {
        if (performance.now() >= end) {
          socket.end();
          return resolve();
        }
        t0 = performance.now();
        socket.write(request);
      };
      socket.on('connect', send);
      socket.on('data', (chunk: Buffer) => {
        buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
        let answer: ReturnType<typeof parseAnswer>;
        try {
          answer = parseAnswer(buf);
        } catch {
          failed = true;
          errors++;
          socket.destroy();
          return resolve();
        }
        if (!answer) return;
        if (answer.status === 200) latencies.push(performance.now() - t0);
        else {
          errors++;
          failed = true; // a server may close the connection after an error: one error, not two
        }
        buf = buf.subarray(answer.end);
        send();
      });
      socket.on('error', () => {
        failed = true;
        errors++;
        resolve();
      });
      // A connection the server closes before the time is up is one fewer in the loop: say so.
      socket.on('close', () => {
        if (!failed && performance.now() < end) errors++;
        resolve();
      });
    });

  await Promise.all(Array.from({ length: concurrency }, connection));
  const elapsed = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  return { answered: latencies.length, rps: latencies.length / elapsed, p50: percentile(latencies, 50), p99: percentile(latencies, 99), errors };
}

/**
 * An open-loop load: `rate` GETs a second for `seconds`, each sent at its planned time whatever the
 * answers before it did (a request that finds every connection busy opens another, up to
 * `maxConnections`, or waits for one). Latency runs from the planned time, so a server that stalls
 * is charged for the requests it held up (no coordinated omission, as wrk2 measures). The warm-up's
 * requests come first and are not counted.
 */
export async function runPaced(
  url: string,
  seconds: number,
  rate: number,
  opts: { warmupSeconds?: number; maxConnections?: number } = {},
): Promise<LoadResult> {
  const maxConnections = opts.maxConnections ?? 256;
  // The first second (by default) opens the connections and warms both sides: sent, not counted.
  const warmupMs = (opts.warmupSeconds ?? 1) * 1000;
  const u = new URL(url);
  if (u.protocol !== 'http:') throw new Error(`the load client speaks plain HTTP/1.1 only, not ${u.protocol} (${url})`);
  const request = Buffer.from(`GET ${u.pathname}${u.search} HTTP/1.1\r\nHost: ${u.host}\r\nConnection: keep-alive\r\nAccept: */*\r\n\r\n`, 'latin1');
  const latencies: number[] = [];
  let errors = 0;
  const total = Math.round((seconds + warmupMs / 1000) * rate);
  // Counted by index, not by comparing planned times: started + i * 1000 / rate less started can
  // come out a hair under the warm-up for the first counted request, which then went uncounted.
  const warmupCount = Math.round((warmupMs / 1000) * rate);
  const started = performance.now();
  let measuredFrom = 0;
  const planned = (i: number) => started + (i * 1000) / rate;
  type Conn = { send(i: number): void };
  const idle: Conn[] = [];
  const waiting: number[] = []; // requests (their numbers) that found no connection
  let opened = 0;
  let sent = 0;
  let settled = 0;
  let finish: () => void = () => {};
  const done = new Promise<void>((r) => (finish = r));
  const answered = () => {
    if (++settled === total) finish();
  };

  const open = (first: number) => {
    opened++;
    const socket = net.connect(Number(u.port || 80), u.hostname.replace(/^\[|\]$/g, ''));
    socket.setNoDelay(true);
    let buf: Buffer = Buffer.alloc(0);
    let at = 0;
    let counted = false;
    let busy = false;
    const conn: Conn = {
      send(i) {
        at = planned(i);
        counted = i >= warmupCount;
        busy = true;
        socket.write(request);
      },
    };
    const free = () => {
      busy = false;
      const next = waiting.shift();
      if (next !== undefined) conn.send(next);
      else idle.push(conn);
    };
    socket.setTimeout(ANSWER_TIMEOUT_MS, () => socket.destroy(new Error('no answer')));
    socket.on('connect', () => conn.send(first));
    socket.on('data', (chunk: Buffer) => {
      buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
      const answer = parseAnswer(buf);
      if (!answer) return;
      if (counted) {
        if (answer.status === 200) latencies.push(performance.now() - at);
        else errors++;
      }
      buf = buf.subarray(answer.end);
      answered();
      free();
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      opened--;
      const i = idle.indexOf(conn);
      if (i >= 0) idle.splice(i, 1);
      if (busy) {
        errors++;
        answered();
      }
    });
  };

  await new Promise<void>((resolve) => {
    const tick = () => {
      const now = performance.now();
      if (!measuredFrom && now - started >= warmupMs) measuredFrom = now;
      while (sent < total && planned(sent) <= now) {
        const i = sent++;
        const conn = idle.pop();
        if (conn) conn.send(i);
        else if (opened < maxConnections) open(i);
        else waiting.push(i);
      }
      if (sent >= total) return resolve();
      // Timers wake a millisecond late or more: the last 2 ms before a planned time are spun on
      // setImmediate (the client has its own core), so requests leave on time, not in bursts.
      const wait = planned(sent) - performance.now();
      if (wait > 2) setTimeout(tick, wait - 2);
      else setImmediate(tick);
    };
    tick();
  });
  await Promise.race([done, new Promise((r) => setTimeout(r, ANSWER_TIMEOUT_MS))]);
  errors += total - settled;
  const elapsed = (performance.now() - (measuredFrom || started)) / 1000;
  latencies.sort((a, b) => a - b);
  return { answered: latencies.length, rps: latencies.length / elapsed, p50: percentile(latencies, 50), p99: percentile(latencies, 99), errors };
}

// `node scripts/bench/http-load.ts paced <url> <seconds> <rate>`: one open-loop run, its result as
// JSON (the benchmarks run it under taskset, away from the server's core).
if (process.argv[1] === new URL(import.meta.url).pathname && process.argv[2] === 'paced') {
  const [url, seconds, rate] = process.argv.slice(3);
  const r = await runPaced(url, Number(seconds), Number(rate));
  process.stdout.write(`${JSON.stringify(r)}\n`);
  process.exit(0);
}
