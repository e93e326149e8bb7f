/**
 * What of an invocation's output is kept: secrets redacted (redact.ts) with one redactor per
 * integration and installation version, and printed lines capped by the log budget
 * (log-budget.ts). Shared by the run of an envelope (invoke.ts) and the lines printed after its
 * answer (late-logs.ts).
 */
import type { Installation } from '../installations/index.ts';
import type { LoadedIntegration } from '../registry/index.ts';
import { createLogBudget } from './log-budget.ts';
import { createRedactor, secretRedactors } from './redact.ts';
import type { RuntimeDeps } from './service-deps.ts';

export type OutputPolicy = ReturnType<typeof createOutputPolicy>;

export function createOutputPolicy(deps: Pick<RuntimeDeps, 'installations' | 'logBudget'>) {
  return {
    budget: createLogBudget(deps.logBudget),
    /** The redactor of this integration's and installation's secrets (GitBook's signing secrets too). */
    redactorFor: secretRedactors<LoadedIntegration, Installation>((integration, installation) =>
      integration.dialect === 'gitbook'
        ? [
            deps.installations.signingSecret('integration', integration.name),
            ...(installation ? [deps.installations.signingSecret('installation', installation.id)] : []),
          ]
        : [],
    ),
    /** An integration no longer loaded: its secrets are unknown, tokens are still redacted. */
    tokensOnly: createRedactor([]),
  };
}
