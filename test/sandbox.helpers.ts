/**
 * Helpers for the sandbox suites: a sandbox with small limits that closes after the test (in a
 * worker process, or in the test's own process as under `serve`), scripts from source or from
 * test/fixtures/hostile, one-line invocations, and a local HTTP server.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync } from 'node:fs';
import type { TestContext } from 'node:test';
import { defaultConfig } from '../src/config/index.ts';
import { memoryLogger } from '../src/log/index.ts';
import { createInProcessSandbox } from '../src/sandbox/in-process.ts';
import { createSandbox, type Envelope, type GuestScript, type InvocationResult, type LogLine, type Sandbox } from '../src/sandbox/index.ts';
import { ROOT } from './helpers/index.ts';

export type Limits = ReturnType<typeof defaultConfig>['sandbox'];

export interface TestSandbox extends Sandbox {
  late: Array<{ integration: string; requestId: string; line: LogLine }>;
  logs: Array<Record<string, unknown>>;
  limits: Limits;
}

export function testSandbox(
  t: TestContext,
  opts: { limits?: Partial<Limits>; allowPrivateNetworks?: boolean; serverOrigin?: string; concurrency?: number; inProcess?: boolean } = {},
): TestSandbox {
  const limits = { ...defaultConfig().sandbox, cpu_time: 500, wall_time: 5000, ...opts.limits };
  const late: TestSandbox['late'] = [];
  const log = memoryLogger();
  // In process: the isolates run in the test's own process, as under `serve` (where a test can reach them).
  const sandbox = (opts.inProcess ? createInProcessSandbox : createSandbox)({
    limits,
    allowPrivateNetworks: opts.allowPrivateNetworks ?? true,
    log,
    serverOrigin: opts.serverOrigin ?? 'http://127.0.0.1:1',
    onLog: (e) => late.push(e),
    concurrency: opts.concurrency,
  });
  t.after(() => sandbox.close());
  return Object.assign(sandbox, { late, logs: log.lines, limits });
}

let version = 0;

/** A script from the body of a module that imports the runtime (`import {...} from '@switchyard/runtime'`). */
export function script(code: string, name = `it-${++version}`): GuestScript {
  return { name, version: String(++version), code };
}

/** A script whose default export is createIntegration({ fetch }) with this handler body. */
export function fetchScript(body: string, name?: string): GuestScript {
  return script(
    `import { createIntegration, ExposableError } from '@switchyard/runtime';
export default createIntegration({ async fetch(request, context) { ${body} } });`,
    name,
  );
}

export function fixture(file: string, name = file.replace(/\.js$/, '')): GuestScript {
  return { name, version: '1', code: readFileSync(`${ROOT}/test/fixtures/hostile/${file}`, 'utf8') };
}

const encoder = new TextEncoder();
let requests = 0;

export interface Call {
  method?: string;
  url?: string;
  headers?: Array<[string, string]>;
  body?: string | Uint8Array;
  environment?: Record<string, unknown>;
}

export async function call(sb: Sandbox, s: GuestScript, c: Call = {}): Promise<InvocationResult & { text: string; json(): any; requestId: string }> {
  const envelope: Envelope = {
    event: { type: 'fetch', request: { method: c.method ?? 'GET', url: c.url ?? 'https://integration.test/', headers: c.headers ?? [] } },
    environment: c.environment ?? {},
    ...(c.body !== undefined ? { fetchBody: typeof c.body === 'string' ? encoder.encode(c.body) : c.body } : {}),
  };
  return invokeEnvelope(sb, s, envelope);
}

/** An invocation's body as text: a string when the integration answered with one, else its bytes decoded. */
export function bodyText(body: Uint8Array | string): string {
  return typeof body === 'string' ? body : new TextDecoder().decode(body);
}

export async function invokeEnvelope(sb: Sandbox, s: GuestScript, envelope: Envelope) {
  const requestId = `req-${++requests}`;
  const result = await sb.invoke({ script: s, envelope, requestId });
  const text = bodyText(result.body);
  return Object.assign(result, { text, json: () => JSON.parse(text), requestId });
}

/** A local HTTP server (port 0) closed after the test; `hits` records every request. */
export async function localServer(
  t: TestContext,
  handler: (req: IncomingMessage & { body: Buffer }, res: ServerResponse) => void,
): Promise<{ url: string; port: number; hits: Array<{ method: string; url: string; headers: IncomingMessage['headers']; body: Buffer }> }> {
  const hits: Array<{ method: string; url: string; headers: IncomingMessage['headers']; body: Buffer }> = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      hits.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      handler(Object.assign(req, { body }), res);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  t.after(
    () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections(); // keep-alive sockets of the worker's HTTP agent
      }),
  );
  server.unref();
  const port = (server.address() as AddressInfo).port;
  return { url: `http://127.0.0.1:${port}`, port, hits };
}
