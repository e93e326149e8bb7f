/**
 * Lines printed after the answer (waitUntil): appended to their invocation's record, redacted and
 * counted against its log budget as the others were. A line that arrives before its record was
 * written waits here and is taken in when the record is (takeEarly).
 */
import type { LoadedIntegration } from '../registry/index.ts';
import type { LogLine } from '../sandbox/index.ts';
import type { Db } from '../store/index.ts';
import type { Dropped } from './log-budget.ts';
import type { OutputPolicy } from './output.ts';
import { redactLine } from './redact.ts';
import type { RuntimeDeps, InvocationNotice } from './service-deps.ts';
import { mapLogLine } from './stack-trace.ts';
import { sqlFor } from '../store/postgres/db.ts';

export function createLateLogs(
  db: Db,
  deps: Pick<RuntimeDeps, 'registry' | 'installations'>,
  output: OutputPolicy,
  records: { flushRecords: () => void; notify: (n: InvocationNotice) => void },
) {
  const { budget, redactorFor, tokensOnly } = output;
  const { flushRecords, notify } = records;
  const appendLog = db.prepare(
    sqlFor(db, {
      sqlite: `UPDATE invocations SET logs = json_insert(logs, '$[#]', json(@line)) WHERE id = @id`,
      // The text kept as written (jsonb would reorder each line's keys).
      postgres: `UPDATE invocations SET logs = CASE WHEN logs = '[]' THEN '[' || @line || ']' ELSE left(logs, -1) || ',' || @line || ']' END WHERE id = @id`,
    }),
  );
  const replaceLastLog = db.prepare(
    sqlFor(db, {
      sqlite: `UPDATE invocations SET logs = json_set(logs, '$[#-1]', json(@line)) WHERE id = @id`,
      postgres: `UPDATE invocations SET logs = jsonb_set(CAST(logs AS jsonb), '{-1}', CAST(@line AS jsonb))::text WHERE id = @id`,
    }),
  );
  // What a late line needs to know about its record: whose it is, the message bytes it holds, and
  // the counts of its marker line when it already ends with one.
  const lateTarget = db.prepare<[string], { integration: string; installationId: string | null; bytes: number; dropped: string | null }>(
    sqlFor(db, {
      sqlite: `SELECT integration, installation_id AS installationId,
       (SELECT coalesce(sum(length(CAST(json_extract(value, '$.message') AS BLOB))), 0) FROM json_each(invocations.logs)) AS bytes,
       json_extract(logs, '$[#-1].dropped') AS dropped
     FROM invocations WHERE id = ?`,
      postgres: `SELECT integration, installation_id AS installationId,
       (SELECT coalesce(sum(octet_length(value ->> 'message')), 0) FROM json_array_elements(CAST(invocations.logs AS json))) AS bytes,
       CAST(logs AS json) -> -1 ->> 'dropped' AS dropped
     FROM invocations WHERE id = ?`,
    }),
  );
  // Lines printed after the answer that arrived before the invocation was recorded (see appendLateLog).
  const early = new Map<string, LogLine[]>();

  return {
    /** The invocation's lines, with those printed after its answer that came ahead of its result. */
    takeEarly(id: string, logs: LogLine[], integration: LoadedIntegration): LogLine[] {
      const lines = early.get(id);
      if (!lines) return logs;
      early.delete(id);
      return [...logs, ...lines.map((l) => mapLogLine(l, integration))];
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
      // Synchronous: the cached copy (its invocation read it a moment ago through find).
      const installation = target.installationId ? deps.installations.cached(target.installationId) : undefined;
      const line = redactLine(integration ? mapLogLine(raw, integration) : raw, integration ? redactorFor(integration, installation) : tokensOnly);
      let dropped: Dropped | undefined;
      if (target.dropped) {
        // The record already ends with its marker: count this line in it.
        const before = JSON.parse(target.dropped) as Dropped;
        const marker = budget.dropMore(before, line);
        replaceLastLog.run({ line: JSON.stringify(marker), id: requestId });
        dropped = { reason: before.reason, lines: 1, bytes: marker.dropped.bytes - before.bytes };
      } else {
        const admitted = budget.admit(target.integration, [line], target.bytes);
        appendLog.run({ line: JSON.stringify(admitted.lines[0]), id: requestId });
        dropped = admitted.dropped;
      }
      if (dropped) notify({ kind: 'dropped', id: requestId, integration: target.integration, ...dropped });
      else notify({ kind: 'log', id: requestId, line });
    },
  };
}
