/**
 * The sandbox: integration code runs in isolated-vm isolates, in the serving process that took the
 * request (in-process.ts; the supervisor replaces a serving process an isolate takes down), or for
 * tests and tools in a worker process of its own (worker-process.ts), with a Workers-style API
 * (Request/Response/fetch/URL/crypto.subtle...), the '@switchyard/runtime' library, and hard limits
 * from config.yaml's `sandbox` section. See docs/sandbox.md.
 */
import { defineModule } from '../module/contract.ts';
import { createWorkerProcessSandbox, type Sandbox, type SandboxOptions } from './worker-process.ts';
import type { GuestScript, LogLine } from './types.ts';
import { createInProcessSandbox } from './in-process.ts';

export type { Sandbox, SandboxOptions } from './worker-process.ts';
export type { Envelope, GuestScript, InvocationError, InvocationResult, LogLine, ScriptExports, CheckResult, Limits } from './types.ts';
export { scriptFileName } from './types.ts';
export { workerCommand, WORKER_FLAG } from './worker-command.ts';
export { buildGuestBundle, guestLibraryId } from './guest-bundle.ts';
export { runtimeTypes } from './runtime-types.ts';

/** Start the sandbox (its worker process starts at once, in the background). */
export function createSandbox(opts: SandboxOptions): Sandbox {
  return createWorkerProcessSandbox(opts);
}

/** The worker's main, for a build that re-runs its own executable with `--sandbox-worker`. */
export async function runSandboxWorker(): Promise<void> {
  const { runWorker } = await import('./worker-main.ts');
  runWorker();
}

/** A line an integration printed after its answer was sent (the runtime records it on the invocation). */
export interface LateLogLine {
  integration: string;
  requestId: string;
  line: LogLine;
}

declare module '../module/contract.ts' {
  interface Capabilities {
    sandbox?: Sandbox;
    /** Load a script in an isolate: an error message when it fails (the registry checks new versions with it). */
    verifyScript?: (script: GuestScript) => Promise<string | undefined>;
    /** Where lines printed after an answer go (the runtime sets it). */
    onSandboxLog?: (e: LateLogLine) => void;
  }
}

/**
 * Attaches `services.sandbox`, and `services.verifyScript` (its check) unless a module set one. Lines printed after a response go to `services.onSandboxLog` when a
 * module set it. Guest fetch follows `webhooks.allow_private_networks`, like webhook delivery.
 */
export const sandboxModule = defineModule({
  name: 'sandbox',
  provides: ['sandbox', 'verifyScript'],
  // It reads services.onSandboxLog at each late line, a hook the runtime fills in: not a capability
  // it uses (the runtime needs this module, so listing it would be a cycle).
  async start(services) {
    const inProcess = services.sandboxInProcess || services.processes;
    const sandbox = (inProcess ? createInProcessSandbox : createSandbox)({
      hooks: services.processes?.sandboxHooks,
      limits: services.config.sandbox,
      allowPrivateNetworks: services.config.webhooks.allow_private_networks,
      log: services.log.child({ module: 'sandbox' }),
      // Asked per invocation: parsed again only when the public URL changes (the port is known late).
      serverOrigin: (() => {
        let url = '';
        let origin = '';
        return () => (services.config.publicUrl === url ? origin : ((url = services.config.publicUrl), (origin = new URL(url).origin)));
      })(),
      onLog: (e) => services.onSandboxLog?.(e),
    });
    services.sandbox = sandbox;
    // Looked up on the sandbox at each call: a test may wrap check() after this start.
    services.verifyScript ??= async (script) => {
      const r = await sandbox.check(script);
      return r.ok ? undefined : (r.error ?? 'the script did not load');
    };
    return () => sandbox.close(services.config.server.shutdown_timeout);
  },
});
