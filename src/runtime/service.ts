/**
 * Runtime dispatch: build the envelope the platform would send, run it in the sandbox, record the
 * invocation with what the code printed, and turn the result into an HTTP response.
 */
import { STATUS_CODES } from 'node:http';
import { FastResponse } from 'srvx';
import { timeOrderedId } from '../ids.ts';
import { SwitchyardError } from '../errors.ts';
import type { Logger } from '../log/index.ts';
import type { Installation, Installations } from '../installations/index.ts';
import { scopesAllow } from '../installations/index.ts';
import type { LoadedIntegration, Registry } from '../registry/index.ts';
import type { Envelope, InvocationResult, LogLine, Sandbox } from '../sandbox/index.ts';
import type { Db } from '../store/index.ts';
import { buildEnvironment } from './environment.ts';
import { beforeInvocationsRead } from './invocations.ts';
import { createLogBudget, type Dropped, type DropReason, type LogBudgetOptions } from './log-budget.ts';
import type { ExportsCache } from './exports-cache.ts';
import { createRedactor, redactLine, redactResult, secretRedactors } from './redact.ts';
import { mapInvocationResult, mapLogLine } from './stack-trace.ts';
import { LOCK_BUSY, lockPatience } from '../store/patience.ts';
import { batchPerTurn } from '../lib/batch.ts';
import { createObservers } from '../lib/observers.ts';

export interface RuntimeDeps {
  db: Db;
  log: Logger;
  publicUrl: () => string;
  registry: Registry;
  sandbox: Sandbox;
  installations: Installations;
  /** Lifetime of the token handed to one invocation (wall time + waitUntil + margin). */
  tokenTtlMs: number;
  /** The headers a public-endpoint answer leaves with (http/origins.ts: our cookies dropped, sandboxed). */
  publicAnswerHeaders?: (headers: Array<[string, string]>, req: Request) => Array<[string, string]>;
  /** GitBook's organization id for `installation.target.organization` (config gitbook.organization). */
  organization?: () => string;
  /** How much of the printed output is stored (see log-budget.ts). */
  logBudget: LogBudgetOptions;
  /** What script versions export, kept across starts (see exports-cache.ts). */
  exportsCache?: ExportsCache;
}

export interface Invocation {
  id: string;
  integration: string;
  installationId?: string;
  eventType: string;
  eventId?: string;
  status: number;
  durationMs: number;
  cpuMs: number;
  error?: { kind: string; message: string; stack?: string };
  logs: LogLine[];
  createdAt: string;
}

/** What the runtime just recorded, for observers (live logs, metrics). */
export type InvocationNotice =
  | { kind: 'recorded'; id: string; integration: string; installationId: string | null; status: number; error?: InvocationResult['error'] }
  | { kind: 'log'; id: string; line: LogLine }
  /** Lines of this invocation that were not stored (counted in its marker line). */
  | { kind: 'dropped'; id: string; integration: string; reason: DropReason; lines: number; bytes: number };

/** `req_` + a time-ordered id (see src/ids.ts): invocation records are inserted at the end of their index. */
export const newRequestId = () => timeOrderedId('req');

/** Longest a public-endpoint invocation's record waits for its commit, and most records one waits with. */
const RECORD_DELAY_MS = 10;
const RECORD_BATCH = 256;

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'proxy-connection', 'te', 'trailer', 'content-length']);

export function toResponse(result: InvocationResult, requestId: string): Response {
  // A header list and the body bytes as they are: srvx writes them to the socket directly, where a
  // standard Response would be read back through a body stream (~10 us per request).
  const headers: Array<[string, string]> = [];
  for (const h of result.headers) if (!HOP_BY_HOP.has(h[0].toLowerCase()) && h[0].toLowerCase() !== 'x-request-id') headers.push(h);
  headers.push(['x-request-id', requestId]);
  const nullBody = result.status === 204 || result.status === 304 || (result.status >= 100 && result.status < 200);
  return new FastResponse(nullBody ? null : result.body, { status: result.status, statusText: STATUS_CODES[result.status], headers });
}

export function createRuntime(deps: RuntimeDeps) {
  const { db, log } = deps;
  const insert = db.prepare(
    `INSERT INTO invocations (id, integration, installation_id, event_type, event_id, status, duration_ms, cpu_ms, error_kind, error_message, error_stack, error_limit, logs, created_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const appendLog = db.prepare(`UPDATE invocations SET logs = json_insert(logs, '$[#]', json(?)) WHERE id = ?`);
  const replaceLastLog = db.prepare(`UPDATE invocations SET logs = json_set(logs, '$[#-1]', json(?)) WHERE id = ?`);
  // What a late line needs to know about its record: whose it is, the message bytes it holds, and
  // the counts of its marker line when it already ends with one.
  const lateTarget = db.prepare<[string], { integration: string; installationId: string | null; bytes: number; dropped: string | null }>(
    `SELECT integration, installation_id AS installationId,
       (SELECT coalesce(sum(length(CAST(json_extract(value, '$.message') AS BLOB))), 0) FROM json_each(invocations.logs)) AS bytes,
       json_extract(logs, '$[#-1].dropped') AS dropped
     FROM invocations WHERE id = ?`,
  );
  const budget = createLogBudget(deps.logBudget);
  const redactorFor = secretRedactors<LoadedIntegration, Installation>((integration, installation) =>
    integration.dialect === 'gitbook'
      ? [deps.installations.signingSecret('integration', integration.name), ...(installation ? [deps.installations.signingSecret('installation', installation.id)] : [])]
      : [],
  );
  const tokensOnly = createRedactor([]); // an integration no longer loaded: its secrets are unknown

  // Group commit. A caller that waits for its record (events, renders, the runtime endpoint) has it
  // committed at the end of this event-loop turn with whatever else is pending; a public-endpoint
  // answer goes out at once and its record joins the next commit, at most RECORD_DELAY_MS later
  // (under load, one commit per tens of requests instead of one per few). Readers of invocations
  // flush first (see beforeInvocationsRead), so what was answered can always be read back; a crash
  // can lose the records of the last few milliseconds, never an event or a delivery.
  type Pending = { row: unknown[]; notice: InvocationNotice; done?: () => void };
  const records = batchPerTurn<Pending>(writeRecords);
  const insertAll = db.transaction((rows: unknown[][]) => {
    for (const row of rows) insert.run(...row);
  });
  const patience = lockPatience(db);
  /**
   * A scheduled flush (a turn's or RECORD_DELAY_MS's) is patient: while another serving process
   * holds the write lock, the records wait a turn rather than the thread sleeping (see
   * store/patience.ts). A reader's flush and the last ones at close write at once, waiting for the
   * lock if they must.
   */
  function writeRecords(batch: Pending[], scheduled: boolean): void {
    try {
      const rows = batch.map((p) => p.row);
      if (!scheduled || closing) insertAll(rows);
      else if (patience.run(() => insertAll(rows)) === LOCK_BUSY) return records.putBack(batch);
    } catch {
      // One bad row must not lose the others: record them one by one.
      for (const p of batch) {
        try {
          insert.run(...p.row);
        } catch (e) {
          log.error('recording an invocation failed', { request_id: p.row[0] as string, error: e as Error });
        }
      }
    }
    for (const p of batch) {
      notify(p.notice);
      p.done?.();
    }
  }
  const flushRecords = () => records.flush();
  beforeInvocationsRead(db, flushRecords);
  function record(row: unknown[], notice: InvocationNotice, wait: boolean): Promise<void> | undefined {
    const p: Pending = { row, notice };
    records.add(p);
    if (closing) flushRecords(); // shutting down: the database closes soon
    else if (wait || records.size >= RECORD_BATCH) records.soon();
    else records.within(RECORD_DELAY_MS);
    if (wait && !closing) return new Promise((done) => (p.done = done));
  }
  let closing = false;
  // Lines printed after the answer that arrived before the invocation was recorded (see appendLateLog).
  const early = new Map<string, LogLine[]>();
  const lateAlready = (id: string, logs: LogLine[], integration: LoadedIntegration) => {
    const lines = early.get(id);
    if (!lines) return logs;
    early.delete(id);
    return [...logs, ...lines.map((l) => mapLogLine(l, integration))];
  };
  const exportsCache = new Map<string, { fetch: boolean; components: string[]; events: string[] }>();
  const observers = createObservers<[InvocationNotice]>(log, 'invocation observer failed');
  const notify = observers.notify;

  /** The integration to run; while the server starts, waits for it to load (see Registry.whenLoaded). */
  async function loaded(name: string): Promise<LoadedIntegration> {
    const integration = deps.registry.get(name) ?? (await deps.registry.whenLoaded(name));
    if (!integration)
      throw new SwitchyardError('not_found', `integration "${name}" is not loaded`, { hint: 'see `switchyard integrations list`' });
    if (!integration.script)
      throw new SwitchyardError('not_found', `integration "${name}" has no script to run`, { hint: 'set `script` in its platform-manifest.yaml' });
    return integration;
  }

  function environmentFor(integration: LoadedIntegration, installation?: Installation): Record<string, unknown> {
    return buildEnvironment({
      publicUrl: deps.publicUrl(),
      integration,
      installation,
      tokens: {
        installation: installation ? deps.installations.invocationToken(installation.id, deps.tokenTtlMs) : undefined,
        integration: deps.installations.integrationToken(integration.name, deps.tokenTtlMs),
      },
      organization: deps.organization?.(),
      signingSecrets:
        integration.dialect === 'gitbook'
          ? {
              integration: deps.installations.signingSecret('integration', integration.name),
              installation: installation ? deps.installations.signingSecret('installation', installation.id) : undefined,
            }
          : undefined,
    });
  }

  /** Run one envelope and record it. Guest faults come back as a 5xx result, never as a throw. */
  async function invoke(opts: {
    integration: LoadedIntegration;
    installation?: Installation;
    envelope: Envelope;
    requestId?: string;
    eventId?: string;
    /** Answer before the record is committed (it is within RECORD_DELAY_MS); public-endpoint requests. */
    recordLater?: boolean;
  }): Promise<{ id: string; result: InvocationResult }> {
    const id = opts.requestId ?? newRequestId();
    // Stack traces pointed at the author's files, then secrets out of the lines, the error and the
    // server's own log line about it, before any is kept.
    const redact = redactorFor(opts.integration, opts.installation);
    const raw = await deps.sandbox.invoke({ script: opts.integration.script!, envelope: opts.envelope, requestId: id });
    const result = redactResult(mapInvocationResult(raw, opts.integration), redact);
    const e = result.error;
    const logs = budget.admit(opts.integration.name, lateAlready(id, result.logs, opts.integration).map((l) => redactLine(l, redact)));
    const recorded = record(
      [
        id,
        opts.integration.name,
        opts.installation?.id ?? null,
        opts.envelope.event.type,
        opts.eventId ?? null,
        result.status,
        result.durationMs,
        result.cpuMs,
        e?.kind ?? null,
        e?.message ?? null,
        e?.stack ?? null,
        e?.kind === 'limit' ? (e.limit ?? null) : null,
        JSON.stringify(logs.lines),
        new Date().toISOString(),
      ],
      { kind: 'recorded', id, integration: opts.integration.name, installationId: opts.installation?.id ?? null, status: result.status, error: e },
      !opts.recordLater,
    );
    if (logs.dropped) notify({ kind: 'dropped', id, integration: opts.integration.name, ...logs.dropped });
    if (recorded) await recorded;
    if (e) {
      const fields = { integration: opts.integration.name, installation: opts.installation?.id, request_id: id, kind: e.kind, limit: e.limit };
      if (e.kind === 'exception') log.warn(`integration code threw: ${e.message}`, { ...fields, stack: e.stack });
      else log.error(`integration invocation failed: ${e.message}`, fields);
    }
    return { id, result };
  }

  /** What a script exports (cached per version; a version read before this start is remembered, see exports-cache.ts). */
  async function exportsOf(integration: LoadedIntegration) {
    const version = integration.script!.version;
    const known = exportsCache.get(version) ?? (await recall(integration));
    if (known) return known;
    const r = await deps.sandbox.check(integration.script!);
    const exp = r.ok ? r.exports : { fetch: false, components: [], events: [] };
    exportsCache.set(version, exp);
    if (r.ok) deps.exportsCache?.write(version, r.library, exp);
    return exp;
  }

  /** What an earlier start learnt this version exports, without loading it. */
  async function recall(integration: LoadedIntegration) {
    const version = integration.script?.version;
    if (!version || !deps.exportsCache) return undefined;
    let exp;
    try {
      exp = await deps.exportsCache.read(version);
    } catch {
      return undefined;
    }
    if (exp && !exportsCache.has(version)) exportsCache.set(version, exp);
    return exportsCache.get(version);
  }

  function runnable(installation: Installation): void {
    if (installation.status === 'uninstalled')
      throw new SwitchyardError('gone', `installation ${installation.id} is uninstalled`);
    if (installation.status === 'paused')
      throw new SwitchyardError('paused', `installation ${installation.id} is paused`, { hint: 'resume it with `switchyard installations resume`' });
  }

  /** Hand an HTTP request to the integration's `fetch`; the answer leaves with the public-answer headers. */
  async function runFetch(integration: Parameters<typeof environmentFor>[0], installation: Installation | undefined, req: Request, body: Uint8Array): Promise<Response> {
    const headers: Array<[string, string]> = [];
    req.headers.forEach((v, k) => headers.push([k, v]));
    const envelope: Envelope = {
      event: { type: 'fetch', request: { method: req.method, url: req.url, headers } },
      environment: environmentFor(integration, installation),
      ...(body.byteLength ? { fetchBody: body } : {}),
    };
    const { id, result } = await invoke({ integration, installation, envelope, recordLater: true });
    return toResponse(deps.publicAnswerHeaders ? { ...result, headers: deps.publicAnswerHeaders(result.headers, req) } : result, id);
  }

  return {
    invoke,
    environmentFor,
    exportsOf,
    recall,

    /** A public-endpoint request: any method and sub-path, handed to the integration's fetch. */
    async fetchPublic(integrationName: string, installationId: string, req: Request, body: Uint8Array): Promise<Response> {
      const installation = deps.installations.get(installationId);
      if (!installation || installation.integration !== integrationName)
        throw new SwitchyardError('not_found', `no installation ${installationId} of integration "${integrationName}"`);
      runnable(installation);
      const integration = await loaded(integrationName);
      return runFetch(integration, installation, req, body);
    },

    /**
     * A request to the integration's own public endpoint: fetch with no installation, and the
     * integration-wide token (GitBook's shape). An OAuth callback there finds its installation in
     * the state it consumes, as on GitBook, and stores the credentials with that token.
     */
    async fetchIntegration(integrationName: string, req: Request, body: Uint8Array): Promise<Response> {
      return runFetch(await loaded(integrationName), undefined, req, body);
    },

    /** A ui_render event: initialState / action / render of one component. */
    async render(
      installationId: string,
      input: { componentId: string; props?: unknown; state?: unknown; action?: unknown; context?: unknown },
    ): Promise<Response> {
      const installation = deps.installations.require(installationId);
      runnable(installation);
      const integration = await loaded(installation.integration);
      const envelope: Envelope = {
        event: {
          type: 'ui_render',
          componentId: input.componentId,
          props: input.props ?? {},
          ...(input.state !== undefined ? { state: input.state } : {}),
          ...(input.action !== undefined ? { action: input.action } : {}),
          context: input.context ?? { type: 'api' },
        },
        environment: environmentFor(integration, installation),
      };
      const { id, result } = await invoke({ integration, installation, envelope });
      return toResponse(result, id);
    },

    /**
     * Deliver a platform event to one installation's `events` handlers (when it has one for the
     * type and its scopes allow it). Returns the invocation, or why it was skipped.
     */
    async emit(
      installation: Installation,
      event: { type: string; eventId?: unknown; [k: string]: unknown },
    ): Promise<{ invocationId?: string; status?: number; error?: InvocationResult['error']; skipped?: string }> {
      // Owed from before a restart, it may run while the integrations still load: wait for this one.
      const integration = deps.registry.get(installation.integration) ?? (await deps.registry.whenLoaded(installation.integration));
      if (!integration?.script) return { skipped: 'no script' };
      if (!scopesAllow(integration.manifest.scopes as string[], event.type)) return { skipped: 'scope' };
      const exp = await exportsOf(integration);
      if (!exp.events.includes(event.type)) return { skipped: 'no handler' };
      const current = deps.installations.get(installation.id) ?? installation;
      const { id, result } = await invoke({
        integration,
        installation: current,
        envelope: { event, environment: environmentFor(integration, current) },
        eventId: typeof event.eventId === 'string' ? event.eventId : undefined,
      });
      return { invocationId: id, status: result.status, error: result.error };
    },

    /**
     * Whether this integration's current script handles `type`, as far as known without running
     * anything: undefined while its exports have not been read yet (see exportsOf).
     */
    handlesKnown(integration: LoadedIntegration, type: string): boolean | undefined {
      if (!integration.script) return false;
      if (!scopesAllow(integration.manifest.scopes as string[], type)) return false;
      return exportsCache.get(integration.script.version)?.events.includes(type);
    },

    /** Lines printed after the response (waitUntil), appended to their invocation. */
    appendLateLog(requestId: string, raw: LogLine): void {
      flushRecords(); // its invocation may still wait for the group commit
      const target = lateTarget.get(requestId);
      if (!target) {
        // Its result is still on the way (a line can come in the same message batch, ahead of it):
        // the record takes it (redacted and capped with the others) when it is written.
        const lines = early.get(requestId) ?? [];
        lines.push(raw);
        early.set(requestId, lines);
        if (early.size > 1000) early.delete(early.keys().next().value!);
        return;
      }
      const integration = deps.registry.get(target.integration);
      const installation = target.installationId ? deps.installations.get(target.installationId) : undefined;
      const line = redactLine(integration ? mapLogLine(raw, integration) : raw, integration ? redactorFor(integration, installation) : tokensOnly);
      let dropped: Dropped | undefined;
      if (target.dropped) {
        // The record already ends with its marker: count this line in it.
        const before = JSON.parse(target.dropped) as Dropped;
        const marker = budget.dropMore(before, line);
        replaceLastLog.run(JSON.stringify(marker), requestId);
        dropped = { reason: before.reason, lines: 1, bytes: marker.dropped.bytes - before.bytes };
      } else {
        const admitted = budget.admit(target.integration, [line], target.bytes);
        appendLog.run(JSON.stringify(admitted.lines[0]), requestId);
        dropped = admitted.dropped;
      }
      if (dropped) notify({ kind: 'dropped', id: requestId, integration: target.integration, ...dropped });
      else notify({ kind: 'log', id: requestId, line });
    },

    /** Observe each recorded invocation and each line printed after its response; returns the unsubscribe function. */
    observe(observer: (n: InvocationNotice) => void): () => void {
      return observers.add(observer);
    },

    /** Shutdown: commit the records still pending, and from now on each one as it comes. */
    flush(): void {
      closing = true;
      flushRecords();
    },

    forgetVersion(version: string): void {
      exportsCache.delete(version);
    },
  };
}

export type Runtime = ReturnType<typeof createRuntime>;
