/**
 * Lines printed after the answer (waitUntil): appended to their invocation's record, redacted and
 * counted against its log budget as the others were. A line that arrives before its record was
 * written waits here and is taken in when the record is (takeEarly).
 */
import type { LoadedIntegration } from '../registry/index.ts';
import type { LogLine } from '../sandbox/index.ts';
import { statement, type Database } from '../store/contract.ts';
import { storageCode } from '../store/health.ts';
import type { Dropped } from './log-budget.ts';
import type { OutputPolicy } from './output.ts';
import { redactLine } from './redact.ts';
import type { RuntimeDeps, InvocationNotice } from './service-deps.ts';
import { mapLogLine } from './stack-trace.ts';

/** Lines waiting for the store, at most (each up to 16 kB). */
const QUEUED_KEPT = 5_000;

const q = {
  appendLog: statement({
    sqlite: `UPDATE invocations SET logs = json_insert(logs, '$[#]', json(@line)) WHERE id = @id`,
    // The text kept as written (jsonb would reorder each line's keys).
    postgres: `UPDATE invocations SET logs = CASE WHEN logs = '[]' THEN '[' || @line || ']' ELSE left(logs, -1) || ',' || @line || ']' END WHERE id = @id`,
  }),
  replaceLastLog: statement({
    sqlite: `UPDATE invocations SET logs = json_set(logs, '$[#-1]', json(@line)) WHERE id = @id`,
    postgres: `UPDATE invocations SET logs = jsonb_set(CAST(logs AS jsonb), '{-1}', CAST(@line AS jsonb))::text WHERE id = @id`,
  }),
  // What a late line needs to know about its record: whose it is, the message bytes it holds, and
  // the counts of its marker line when it already ends with one.
  lateTarget: statement<{ integration: string; installationId: string | null; bytes: number; dropped: string | null }>({
    sqlite: `SELECT integration, installation_id AS installationId,
       (SELECT coalesce(sum(length(CAST(json_extract(value, '$.message') AS BLOB))), 0) FROM json_each(invocations.logs)) AS bytes,
       json_extract(logs, '$[#-1].dropped') AS dropped
     FROM invocations WHERE id = ?`,
    postgres: `SELECT integration, installation_id AS installationId,
       (SELECT coalesce(sum(octet_length(value ->> 'message')), 0) FROM json_array_elements(CAST(invocations.logs AS json))) AS bytes,
       CAST(logs AS json) -> -1 ->> 'dropped' AS dropped
     FROM invocations WHERE id = ?`,
  }),
};

export function createLateLogs(
  database: Database,
  deps: Pick<RuntimeDeps, 'registry' | 'installations' | 'log'>,
  output: OutputPolicy,
  records: { flushRecords: () => Promise<void>; notify: (n: InvocationNotice) => void },
) {
  const { budget, redactorFor, tokensOnly } = output;
  const { flushRecords, notify } = records;
  // Lines printed after the answer that arrived before the invocation was recorded (see appendLateLog).
  const early = new Map<string, LogLine[]>();

  // The line being looked up (one at a time: the queue drains in order), and whether its result
  // came meanwhile (takeEarly says so): then its record is queued, and the line looks again
  // rather than waiting for a result that has come already. Every invocation's id used to be kept
  // for this instead (a set of the last 10,000: ~2.4 us of a hello request, for a rare line).
  let looking: { id: string; came: boolean } | undefined;
  const queue: Array<{ requestId: string; raw: LogLine }> = [];
  let draining: Promise<void> | undefined;
  let gaveWay = 0;
  const drain = () =>
    (draining = (async () => {
      try {
        for (let next = queue.shift(); next; next = queue.shift()) {
          try {
            await store(next.requestId, next.raw);
          } catch (e) {
            deps.log.error('storing a line printed after the answer failed', { request_id: next.requestId, error: e as Error });
            // The store failed, not the line: those waiting would each wait for it again.
            if (storageCode(e)) gaveWay += queue.splice(0).length;
          }
        }
      } finally {
        draining = undefined;
        if (gaveWay) deps.log.warn('lines printed after the answer were not stored: too many waited for a slow store', { lines: gaveWay });
        gaveWay = 0;
      }
    })());

  async function store(requestId: string, raw: LogLine): Promise<void> {
    const look = { id: requestId, came: false };
    looking = look;
    try {
      await storeLooking(look, raw);
    } finally {
      if (looking === look) looking = undefined;
    }
  }
  async function storeLooking(look: { id: string; came: boolean }, raw: LogLine): Promise<void> {
    const requestId = look.id;
    await flushRecords(); // its invocation may still wait for the group commit
    let target = await database.get(q.lateTarget, [requestId]);
    if (!target && look.came) {
      // Its result came while we looked: its record is queued (or committed) now.
      await flushRecords();
      target = await database.get(q.lateTarget, [requestId]);
    }
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
    // Synchronous: the cached copy (its invocation read it a moment ago through find).
    const installation = target.installationId ? deps.installations.cached(target.installationId) : undefined;
    const line = redactLine(integration ? mapLogLine(raw, integration) : raw, integration ? redactorFor(integration, installation) : tokensOnly);
    let dropped: Dropped | undefined;
    if (target.dropped) {
      // The record already ends with its marker: count this line in it.
      const before = JSON.parse(target.dropped) as Dropped;
      const marker = budget.dropMore(before, line);
      await database.run(q.replaceLastLog, { line: JSON.stringify(marker), id: requestId });
      dropped = { reason: before.reason, lines: 1, bytes: marker.dropped.bytes - before.bytes };
    } else {
      const admitted = budget.admit(target.integration, [line], Number(target.bytes));
      await database.run(q.appendLog, { line: JSON.stringify(admitted.lines[0]), id: requestId });
      dropped = admitted.dropped;
    }
    if (dropped) notify({ kind: 'dropped', id: requestId, integration: target.integration, ...dropped });
    else notify({ kind: 'log', id: requestId, line });
  }

  return {
    /** The invocation's lines, with those printed after its answer that came ahead of its result. */
    takeEarly(id: string, logs: LogLine[], integration: LoadedIntegration): LogLine[] {
      if (looking?.id === id) looking.came = true;
      const lines = early.get(id);
      if (!lines) return logs;
      early.delete(id);
      return [...logs, ...lines.map((l) => mapLogLine(l, integration))];
    },

    /**
     * Lines printed after the response (waitUntil), appended to their invocation. The sandbox hands
     * them over synchronously: they are queued and stored in the order they came, one after the
     * other (a line's update reads what the one before it wrote).
     */
    appendLateLog(requestId: string, raw: LogLine): void {
      if (queue.length >= QUEUED_KEPT) {
        // A store that does not keep up (or is away): the oldest line waiting gives way.
        queue.shift();
        gaveWay++;
      }
      queue.push({ requestId, raw });
      if (!draining) void drain();
    },

    /** Resolves once every line handed over so far is stored (or given up on). */
    async settled(): Promise<void> {
      while (draining) await draining;
    },
  };
}
