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
import { ROOT, freshPostgresDatabase, startTestServer, testConfig, tmpDir, waitFor, type TestServer } from './helpers/index.ts';
import { counting } from './helpers/counting.ts';
import { connectStore } from '../src/store/index.ts';
import { allMigrations } from '../src/server/migrations.ts';
import { useNodeId } from '../src/store/lease-owner.ts';
import { generationsFor } from '../src/store/generations.ts';
import { memoryLogger } from '../src/log/index.ts';
import { createWebhooks, type WebhooksDeps } from '../src/webhooks/index.ts';
import type { WebhooksConfig } from '../src/webhooks/sender.ts';
import { modules as defaultModules } from '../src/server/modules.ts';
import { webhooksModule, type Deliveries, type DeliveryDetail, type WebhooksService } from '../src/webhooks/index.ts';
import { eventsModule } from '../src/events/index.ts';
import { createEvents } from '../src/events/service.ts';
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

/**
 * A store (SQLite, or PostgreSQL with SWITCHYARD_TEST_PG_URL), a scripted receiver and the webhooks
 * service over a counting database (helpers/counting.ts), with one subscriber, `inst_1`, at the
 * receiver: `send(i)` enqueues event `evt_<i>` in a transaction of its own, `sendMany` several in one.
 */
export async function countedSender(
  t: TestContext,
  answer: Parameters<typeof scriptedReceiver>[1],
  config: Partial<WebhooksConfig> = {},
  /** As a serving process beside others (their share of the endpoint's slots, the supervisor's due messages). */
  processes?: WebhooksDeps['processes'],
) {
  const dir = tmpDir(t);
  const store = await connectStore(dir, { migrations: allMigrations(), url: process.env.SWITCHYARD_TEST_PG_URL ? freshPostgresDatabase(dir) : undefined });
  t.after(() => store.close());
  useNodeId(dir); // this process's lease owner (a server claims its node id first)
  const rx = await scriptedReceiver(t, answer);
  const url = rx.url;
  const counted = counting(store.database);
  const webhooks = { ...testConfig(t).webhooks, ...config };
  const service = await createWebhooks({
    database: counted.database,
    log: memoryLogger(),
    config: () => webhooks,
    subscriptions: () => ({ forEventType: () => [{ installationId: 'inst_1', url }] }),
    ...(processes ? { processes } : {}),
  });
  t.after(() => service.stop(0));
  // On PostgreSQL the caches are dropped once when the store's listening connection opens: under
  // load that could come after the first sends, and an event counted below re-read its secret.
  await generationsFor({ database: counted.database }).ready();
  await store.database.transaction((tx) => service.webhooks.createSecret(tx, 'inst_1'));
  service.start();
  const recorded: string[] = [];
  service.deliveries.onAttempt((a) => recorded.push(a.record.outcome));
  const sendMany = (ids: number[]) =>
    counted.database.transaction((tx) =>
      service.deliveries.enqueueEvents(
        tx,
        ids.map((i) => ({ event: { eventId: `evt_${i}`, type: 'site_view' }, subscriptions: [{ installationId: 'inst_1', url }] })),
      ),
    );
  const send = async (i: number) => void (await sendMany([i]));
  // Ingest as the API does it (events/service.ts): the events stored with their deliveries.
  const events = createEvents({
    database: counted.database,
    log: memoryLogger(),
    subscriptions: { forEventType: () => [{ installationId: 'inst_1', url }] },
    deliveries: service.deliveries,
  });
  return { store, rx, url, recorded, send, sendMany, events, service, ...counted };
}
