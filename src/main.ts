#!/usr/bin/env node
/**
 * The program's entry: the `switchyard` CLI (src/cli/commands.ts), or the sandbox's worker process
 * when started with --sandbox-worker. Everything past Node's compile cache is imported from here on
 * demand, so the cache covers it (see native/compile-cache.ts).
 */
import { enableCompileCache } from './native/compile-cache.ts';

export async function cli(argv = process.argv.slice(2)): Promise<void> {
  return (await import('./cli/commands.ts')).cli(argv);
}

// The sandbox's worker process is this same program started with --sandbox-worker (see
// src/sandbox/worker-command.ts): the single executable re-runs itself that way.
if (import.meta.main) {
  enableCompileCache();
  if (process.argv.includes('--sandbox-worker')) await (await import('./sandbox/index.ts')).runSandboxWorker();
  else {
    await cli();
    // A serving process that could not start: its IPC channel to the supervisor would keep it alive.
    if (process.env.SWITCHYARD_SERVING) process.exit(process.exitCode);
  }
}
