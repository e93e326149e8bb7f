/**
 * Running one envelope: the sandbox runs it, stack traces are pointed at the author's files,
 * secrets are redacted and the printed lines capped, the invocation is recorded (group commit,
 * see records.ts), and a fault is logged. Guest faults come back as a 5xx result, never as a throw.
 */
import { timeOrderedId } from '../ids.ts';
import type { Installation } from '../installations/index.ts';
import type { LoadedIntegration } from '../registry/index.ts';
import type { Envelope, InvocationResult, LogLine } from '../sandbox/index.ts';
import type { OutputPolicy } from './output.ts';
import { redactLine, redactResult } from './redact.ts';
import type { InvocationNotice, RuntimeDeps } from './service-deps.ts';
import { mapInvocationResult } from './stack-trace.ts';

/** `req_` + a time-ordered id (see src/ids.ts): invocation records are inserted at the end of their index. */
export const newRequestId = () => timeOrderedId('req');

export interface InvokeOptions {
  integration: LoadedIntegration;
  installation?: Installation;
  envelope: Envelope;
  requestId?: string;
  eventId?: string;
  /** Answer before the record is committed (it is within RECORD_DELAY_MS); public-endpoint requests. */
  recordLater?: boolean;
}

export type Invoke = (opts: InvokeOptions) => Promise<{ id: string; result: InvocationResult }>;

export function createInvoke(
  deps: Pick<RuntimeDeps, 'sandbox' | 'log'>,
  output: OutputPolicy,
  records: { record: (row: unknown[], notice: InvocationNotice, wait: boolean) => Promise<void> | undefined; notify: (n: InvocationNotice) => void },
  takeEarly: (id: string, logs: LogLine[], integration: LoadedIntegration) => LogLine[],
): Invoke {
  const { log } = deps;
  const { budget, redactorFor } = output;
  const { record, notify } = records;

  /** Run one envelope and record it. Guest faults come back as a 5xx result, never as a throw. */
  return async function invoke(opts) {
    const id = opts.requestId ?? newRequestId();
    // Stack traces pointed at the author's files, then secrets out of the lines, the error and the
    // server's own log line about it, before any is kept.
    const redact = redactorFor(opts.integration, opts.installation);
    const raw = await deps.sandbox.invoke({ script: opts.integration.script!, envelope: opts.envelope, requestId: id });
    const result = redactResult(mapInvocationResult(raw, opts.integration), redact);
    const e = result.error;
    const logs = budget.admit(
      opts.integration.name,
      takeEarly(id, result.logs, opts.integration).map((l) => redactLine(l, redact)),
    );
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
  };
}
