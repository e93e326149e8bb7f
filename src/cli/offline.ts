/**
 * `--offline`: the read-only inspection commands read the database directly (the SQLite file, or
 * PostgreSQL when `store:` names it), with the same query code and the same JSON shapes as the
 * management API. The connection is read-only (`query_only` on SQLite,
 * `default_transaction_read_only` on PostgreSQL), takes no lock and runs no migration; a server
 * keeps writing while we read (SQLite's WAL mode; PostgreSQL's own concurrency), so it works
 * whether the server is running, stopped or hung.
 */
import type { LoadedConfig } from '../config/index.ts';
import { createEvents, createHandlerRuns } from '../events/index.ts';
import { memoryLogger } from '../log/index.ts';
import { createInvocations } from '../runtime/index.ts';
import { connectStore } from '../store/index.ts';
import { statement } from '../store/contract.ts';
import { createQueue, endpointParam, parseTimeParam } from '../webhooks/index.ts';
import { SwitchyardError } from '../errors.ts';
import type { InspectionSource } from './inspect.ts';

const tableNames = statement<{ name: string }>({
  sqlite: "SELECT name FROM sqlite_master WHERE type = 'table'",
  postgres: 'SELECT tablename AS name FROM pg_tables WHERE schemaname = current_schema()',
});

export async function offlineSource(config: LoadedConfig): Promise<InspectionSource> {
  const store = await connectStore(config.data_dir, { readonly: true, url: config.store || undefined });
  let tables: Set<string>;
  try {
    tables = new Set((await store.database.all(tableNames)).map((r) => r.name));
  } catch (e) {
    store.close();
    throw e;
  }
  for (const t of ['webhook_deliveries', 'events', 'invocations'])
    if (!tables.has(t)) {
      void store.close();
      throw new SwitchyardError('not_found', `${store.file} has no ${t} table yet`, {
        hint: 'start this version of the server once with `switchyard serve` (it creates the tables)',
      });
    }
  const queue = createQueue(store.database, { maxAttempts: () => config.webhooks.max_retries + 1 });
  const events = createEvents({
    database: store.database,
    log: memoryLogger(),
  });
  const invocations = createInvocations(store.database);
  // A database from before handler runs existed has none to show.
  const runs = tables.has('event_handler_runs') ? createHandlerRuns(store.database, { maxAttempts: () => config.webhooks.max_retries + 1 }) : undefined;
  const time = (v: string | undefined, name: string) => parseTimeParam(v, name);
  const num = (v: string | undefined) => (v === undefined ? undefined : Number(v));

  return {
    offline: true,
    async deliveries(f) {
      const { endpoint, ...rest } = f;
      return queue.list({
        ...rest,
        origin: endpointParam(endpoint, '--endpoint'),
        status: f.status as never,
        since: time(f.since, 'since'),
        until: time(f.until, 'until'),
        limit: num(f.limit),
      });
    },
    async delivery(id) {
      const d = await queue.get(id);
      if (!d) throw new SwitchyardError('not_found', `no delivery ${id}`, { hint: 'list them with `switchyard deliveries list --offline`' });
      return d;
    },
    async events(f) {
      return events.list({ ...f, since: time(f.since, 'since'), until: time(f.until, 'until'), limit: num(f.limit) });
    },
    async event(id) {
      const e = await events.get(id);
      if (!e) throw new SwitchyardError('not_found', `no event ${id}`, { hint: 'list events with `switchyard events list --offline`' });
      return { ...e, deliveries: (await queue.list({ event: id, limit: 500 })).deliveries, handlerRuns: (await runs?.ofEvent(id)) ?? [] };
    },
    async invocations(f) {
      return invocations.list({ ...f, errors: f.errors, since: time(f.since, 'since'), until: time(f.until, 'until'), limit: num(f.limit) });
    },
    async invocation(id) {
      const i = await invocations.get(id);
      if (!i) throw new SwitchyardError('not_found', `no invocation ${id}`);
      return i;
    },
    async handlerRuns(f) {
      if (!runs) return { handlerRuns: [], nextCursor: null };
      return runs.list({ ...f, status: f.status as never, since: time(f.since, 'since'), until: time(f.until, 'until'), limit: num(f.limit) });
    },
    close: () => store.close(),
  };
}
