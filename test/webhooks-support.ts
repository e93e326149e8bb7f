/**
 * Support for the webhook delivery tests: a server with the webhooks and events modules and a way
 * to subscribe a URL. With the installations module wired into src/server/modules.ts, subscriptions are
 * real webhook installations made through the management API; before that, a test-only module
 * provides `services.subscriptions`.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TestContext } from 'node:test';
import { join } from 'node:path';
import { ROOT, startTestServer, waitFor, type TestServer } from './helpers/index.ts';
import { modules as defaultModules } from '../src/server/modules.ts';
import { webhooksModule, type Deliveries, type DeliveryDetail, type WebhooksService } from '../src/webhooks/index.ts';
import { eventsModule } from '../src/events/index.ts';
import type { Module } from '../src/module/contract.ts';
import { capabilityOf } from '../src/module/capabilities.ts';

/** The real installations module when src/server/modules.ts has it (or SWITCHYARD_TEST_REAL_INSTALLATIONS=1 forces it in). */
async function realModules(): Promise<Module[] | undefined> {
  if (defaultModules.some((m) => m.name === 'installations')) return defaultModules;
  if (!process.env.SWITCHYARD_TEST_REAL_INSTALLATIONS) return undefined;
  const registry = '../src/registry/index.ts';
  const installations = '../src/installations/index.ts';
  return [(await import(registry)).registryModule, (await import(installations)).installationsModule, webhooksModule, eventsModule];
}

export interface Received {
  at: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  method: string;
  url: string;
}

/** A local receiver whose answers are scripted: `answer(n, req)` gets the 1-based request number. */
export async function scriptedReceiver(
  t: TestContext,
  answer: (n: number, r: Received, res: http.ServerResponse) => void | number | Promise<void | number>,
): Promise<{ url: string; port: number; requests: Received[]; close(): void }> {
  const requests: Received[] = [];
  const server = http.createServer((req, res) => {
    const at = performance.now();
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (d) => (body += d));
    req.on('end', async () => {
      const r: Received = { at, headers: req.headers, body, method: req.method!, url: req.url! };
      requests.push(r);
      const status = await answer(requests.length, r, res);
      if (typeof status === 'number') res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ status }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const close = () => {
    server.closeAllConnections();
    server.close();
  };
  t.after(close);
  const port = (server.address() as AddressInfo).port;
  return { url: `http://127.0.0.1:${port}/hook`, port, requests, close };
}

export interface DeliveryTestServer extends TestServer {
  deliveries: Deliveries;
  webhooks: WebhooksService;
  subscribe(url: string, types?: string[]): Promise<{ installationId: string; secret: string }>;
  uninstall(installationId: string): Promise<void>;
  /** Ingest through the API; returns the ingest answer. */
  send(event: Record<string, unknown>): Promise<{ status: number; body: any }>;
  settled(id: string, timeoutMs?: number): Promise<DeliveryDetail>;
}

type Over = Parameters<typeof startTestServer>[1];

export async function deliveryServer(t: TestContext, over: Over = {}, extra: Module[] = []): Promise<DeliveryTestServer> {
  const fake: Array<{ installationId: string; url: string; types: string[] }> = [];
  let server: TestServer;
  const real = await realModules();
  if (real) {
    server = await startTestServer(t, { integrations_dir: join(ROOT, 'integrations'), ...over } as Over, { modules: [...real, ...extra] });
  } else {
    const subscriptions: Module = {
      name: 'test-subscriptions',
      provides: ['subscriptions'],
      start(s) {
        s.subscriptions = {
          forEventType: (type: string) => fake.filter((f) => f.types.includes(type)).map(({ installationId, url }) => ({ installationId, url })),
        };
      },
    };
    server = await startTestServer(t, over, { modules: [webhooksModule, subscriptions, ...extra, eventsModule] });
  }
  const deliveries = capabilityOf(server.services, 'deliveries');
  const webhooks = capabilityOf(server.services, 'webhooks');
  let n = 0;
  return {
    ...server,
    deliveries,
    webhooks,
    async subscribe(url, types = ['site_view', 'page_feedback', 'space_content_updated']) {
      if (real) {
        const r = await server.api('POST', '/api/v1/installations', {
          integration: 'webhook',
          configuration: { webhook_url: url, event_types: types.join(',') },
        });
        if (r.status !== 201) throw new Error(`install failed: ${r.status} ${JSON.stringify(r.body)}`);
        return { installationId: r.body.installation.id, secret: r.body.webhookSecret };
      }
      const installationId = `inst_test_${++n}`;
      fake.push({ installationId, url, types });
      return { installationId, secret: await server.services.store.database.transaction((tx) => webhooks.createSecret(tx, installationId)) };
    },
    async uninstall(installationId) {
      if (real) {
        const r = await server.api('DELETE', `/api/v1/installations/${installationId}`);
        if (r.status !== 200) throw new Error(`uninstall failed: ${r.status} ${JSON.stringify(r.body)}`);
        return;
      }
      fake.splice(
        fake.findIndex((f) => f.installationId === installationId),
        1,
      );
      await server.services.store.database.transaction((tx) => webhooks.removeInstallation(tx, installationId));
    },
    send: (event) => server.api('POST', '/api/v1/events', event),
    async settled(id, timeoutMs = 10_000) {
      return waitFor(async () => {
        const d = await deliveries.get(id);
        return d && (d.status === 'delivered' || d.status === 'failed' || d.status === 'cancelled') ? d : undefined;
      }, timeoutMs);
    },
  };
}

/**
 * A module that wraps the installations' subscriptions so that enqueueing a delivery of `type`
 * throws (its URL cannot be read) while `failing()` says so: the event row is already written when
 * it fails, which is what a rollback must undo.
 */
export function subscriptionsFailingFor(type: string, failing: () => boolean = () => true): Module {
  return {
    name: 'half-broken-subscriptions',
    // Wraps the subscriptions the events module is handed: starts after their provider, before events.
    provides: ['subscriptions'],
    needs: ['subscriptions'],
    start(services) {
      const real = services.subscriptions;
      services.subscriptions = {
        forEventType(t: string) {
          if (failing() && t === type)
            return [
              {
                installationId: 'inst_broken',
                get url(): string {
                  throw new Error(`subscriptions unavailable for ${type}`);
                },
              },
            ];
          return real?.forEventType(t) ?? [];
        },
      };
    },
  };
}
