/**
 * Runtime dispatch: build the envelope the platform would send, run it in the sandbox, record the
 * invocation with what the code printed, and turn the result into an HTTP response.
 *
 * It is built of stages, each in its own file: the invocation records and their group commit
 * (records.ts), what of the output is kept (output.ts: redaction, log budget), running one
 * envelope (invoke.ts), lines printed after the answer (late-logs.ts), the environment and its
 * tokens (environment.ts), what may run (runnable.ts), what scripts export (known-exports.ts),
 * the public endpoints (public-fetch.ts) and renders and platform events (platform-events.ts);
 * composing them is here. Every stage is made once, at construction: the public endpoint's path
 * calls them as it called its own closures.
 */
import { environmentOf } from './environment.ts';
import { createInvoke } from './invoke.ts';
import { createKnownExports } from './known-exports.ts';
import { createLateLogs } from './late-logs.ts';
import { createOutputPolicy } from './output.ts';
import { createPlatformEvents } from './platform-events.ts';
import { createPublicFetch } from './public-fetch.ts';
import { createInvocationRecords } from './records.ts';
import { loadedNowOf, loadedOf } from './runnable.ts';
import type { InvocationNotice, RuntimeDeps } from './service-deps.ts';

export type { Invocation, InvocationNotice, RuntimeDeps } from './service-deps.ts';
export { newRequestId } from './invoke.ts';
export { toResponse } from './public-fetch.ts';

export function createRuntime(deps: RuntimeDeps) {
  const records = createInvocationRecords(deps.database, deps.log);
  const output = createOutputPolicy(deps);
  const lateLogs = createLateLogs(deps.database, deps, output, records);
  const invoke = createInvoke(deps, output, records, lateLogs.takeEarly);
  const environmentFor = environmentOf(deps);
  const loaded = loadedOf(deps.registry);
  const known = createKnownExports(deps);
  const { exportsOf } = known;

  return {
    invoke,
    environmentFor,
    exportsOf,
    recall: known.recall,
    ...createPublicFetch(deps, { invoke, environmentFor, loaded, loadedNow: loadedNowOf(deps.registry) }),
    ...createPlatformEvents(deps, { invoke, environmentFor, loaded, exportsOf }),
    handlesKnown: known.handlesKnown,
    appendLateLog: lateLogs.appendLateLog,

    /** Observe each recorded invocation and each line printed after its response; returns the unsubscribe function. */
    observe(observer: (n: InvocationNotice) => void): () => void {
      return records.observe(observer);
    },

    /**
     * Shutdown: commit the records still pending, and from now on each one as it comes; resolves
     * once they and the lines printed after answers handed over so far are stored.
     */
    async flush(): Promise<void> {
      await lateLogs.settled();
      await records.close();
      await lateLogs.settled();
    },

    forgetVersion: known.forgetVersion,
  };
}

export type Runtime = ReturnType<typeof createRuntime>;
