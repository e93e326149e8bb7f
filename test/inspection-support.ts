/**
 * Support for the inspection, metrics and retention tests: a real server whose integrations folder
 * holds the shipped webhook integration and the `inspector` fixture (an event handler that prints,
 * throws or breaches its CPU limit on demand), real webhook installations, a scripted receiver,
 * and the CLI pointed at the server through SWITCHYARD_URL / SWITCHYARD_ADMIN_TOKEN.
 */
import { cpSync, mkdirSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { samplePayload } from '../src/events/index.ts';
import type { DeliveryDetail } from '../src/webhooks/index.ts';
import { ROOT, runCli, startTestServer, tmpDir, waitFor, type CliResult, type TestServer } from './helpers/index.ts';

type Over = Parameters<typeof startTestServer>[1];

export interface Receiver {
  url: string;
  /** Status answered from now on. */
  answer: number;
  /** How many requests were answered with each status. */
  answered: Map<number, number>;
  bodies: string[];
}

export async function receiver(t: TestContext, answer = 200): Promise<Receiver> {
  const r: Receiver = { url: '', answer, answered: new Map(), bodies: [] };
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      const status = r.answer;
      r.bodies.push(body);
      r.answered.set(status, (r.answered.get(status) ?? 0) + 1);
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ status }));
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  r.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  return r;
}

export interface InspectionServer extends TestServer {
  env: NodeJS.ProcessEnv;
  cli(args: string[], opts?: { env?: NodeJS.ProcessEnv }): Promise<CliResult>;
  /** `cli` and parse stdout as JSON (asserting exit 0). */
  cliJson<T = any>(args: string[]): Promise<T>;
  subscribe(url: string, types?: string[]): Promise<string>;
  install(integration: string, configuration?: Record<string, unknown>): Promise<string>;
  /** Ingest a sample event of `type` with `overrides`; returns the ingest answer. */
  send(type: string, overrides?: Record<string, unknown>): Promise<{ eventId: string; deliveries: Array<{ id: string; installationId: string }> }>;
  settled(id: string, timeoutMs?: number): Promise<DeliveryDetail>;
}

/** The webhook integration and the inspector fixture, copied into a fresh integrations folder. */
export function integrationsDir(t: TestContext): string {
  const dir = join(tmpDir(t, 'switchyard-inspection-'), 'integrations');
  mkdirSync(dir);
  cpSync(join(ROOT, 'integrations/webhook'), join(dir, 'webhook'), { recursive: true });
  cpSync(join(ROOT, 'test/fixtures/inspection/inspector'), join(dir, 'inspector'), { recursive: true });
  return dir;
}

export async function inspectionServer(t: TestContext, over: Over = {}): Promise<InspectionServer> {
  const s = await startTestServer(t, { integrations_dir: integrationsDir(t), ...over } as Over);
  const env = { SWITCHYARD_URL: s.url, SWITCHYARD_ADMIN_TOKEN: s.token };
  const cli = (args: string[], opts: { env?: NodeJS.ProcessEnv } = {}) => runCli(args, { env: { ...env, ...opts.env } });
  return {
    ...s,
    env,
    cli,
    async cliJson(args) {
      const r = await cli([...args, '--json']);
      if (r.code !== 0) throw new Error(`switchyard ${args.join(' ')} exited ${r.code}: ${r.stderr}`);
      return JSON.parse(r.stdout);
    },
    async subscribe(url, types = ['site_view', 'page_feedback', 'space_content_updated']) {
      const r = await s.api('POST', '/api/v1/installations', { integration: 'webhook', configuration: { webhook_url: url, event_types: types.join(',') } });
      if (r.status !== 201) throw new Error(`install failed: ${r.status} ${JSON.stringify(r.body)}`);
      return r.body.installation.id as string;
    },
    async install(integration, configuration = {}) {
      await waitFor(async () => (await s.api('GET', `/api/v1/integrations/${integration}`)).status === 200, 10_000);
      const r = await s.api('POST', '/api/v1/installations', { integration, configuration });
      if (r.status !== 201) throw new Error(`install failed: ${r.status} ${JSON.stringify(r.body)}`);
      return r.body.installation.id as string;
    },
    async send(type, overrides = {}) {
      const r = await s.api('POST', '/api/v1/events', samplePayload(type, overrides));
      if (r.status !== 202) throw new Error(`ingest failed: ${r.status} ${JSON.stringify(r.body)}`);
      return r.body;
    },
    async settled(id, timeoutMs = 10_000) {
      return waitFor(async () => {
        const d = (await s.api('GET', `/api/v1/deliveries/${id}`)).body as DeliveryDetail;
        return d.status === 'delivered' || d.status === 'failed' || d.status === 'cancelled' ? d : undefined;
      }, timeoutMs);
    },
  };
}
