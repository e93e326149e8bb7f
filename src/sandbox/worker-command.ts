/**
 * How the server starts the sandbox worker. From a source checkout: this Node binary with
 * --no-node-snapshot running worker-entry.ts. From the single executable (Node SEA): the
 * executable itself with `--sandbox-worker`; its main must then call runSandboxWorker() (exported
 * from src/sandbox/index.ts) before anything else when process.argv includes that flag.
 */
import { fileURLToPath } from 'node:url';

export const WORKER_FLAG = '--sandbox-worker';

function isSea(): boolean {
  try {
    const sea = process.getBuiltinModule?.('node:sea') as { isSea?: () => boolean } | undefined;
    return Boolean(sea?.isSea?.());
  } catch {
    return false;
  }
}

export function workerCommand(): { command: string; args: string[] } {
  if (isSea()) return { command: process.execPath, args: [WORKER_FLAG] };
  const entry = fileURLToPath(new URL('./worker-entry.ts', import.meta.url));
  return { command: process.execPath, args: ['--no-node-snapshot', entry, WORKER_FLAG] };
}
