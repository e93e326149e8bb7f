#!/usr/bin/env node
/**
 * The `switchyard` command tree. Each group lives in src/cli/<group>.ts and is loaded on demand,
 * so `switchyard --help` stays fast.
 */
import { defineCommand } from 'citty';
import { run } from './cli/run.ts';
import { VERSION } from './version.ts';

export const main = defineCommand({
  meta: { name: 'switchyard', version: VERSION, description: 'Integration runtime and durable webhook delivery' },
  subCommands: {
    serve: () => import('./cli/serve.ts').then((m) => m.default),
    new: () => import('./cli/new.ts').then((m) => m.default),
    check: () => import('./cli/check.ts').then((m) => m.default),
    integrations: () => import('./cli/integrations.ts').then((m) => m.default),
    install: () => import('./cli/installations.ts').then((m) => m.install),
    installations: () => import('./cli/installations.ts').then((m) => m.default),
    events: () => import('./cli/events.ts').then((m) => m.default),
    deliveries: () => import('./cli/deliveries.ts').then((m) => m.default),
    logs: () => import('./cli/logs.ts').then((m) => m.default),
    retention: () => import('./cli/retention.ts').then((m) => m.default),
    backup: () => import('./cli/backup.ts').then((m) => m.backup),
    restore: () => import('./cli/backup.ts').then((m) => m.restore),
    receive: () => import('./cli/receive.ts').then((m) => m.default),
    sign: () => import('./cli/sign.ts').then((m) => m.sign),
    verify: () => import('./cli/sign.ts').then((m) => m.verify),
  },
});

export async function cli(argv = process.argv.slice(2)): Promise<void> {
  // `switchyard deliveries list | head`: the reader left; stop quietly as other Unix tools do.
  for (const stream of [process.stdout, process.stderr])
    stream.on('error', (e: NodeJS.ErrnoException) => {
      if (e.code !== 'EPIPE') throw e;
      process.exit(typeof process.exitCode === 'number' ? process.exitCode : 0);
    });
  process.exitCode = await run(main, argv);
}

// The sandbox's worker process is this same program started with --sandbox-worker (see
// src/sandbox/worker-command.ts): the single executable re-runs itself that way.
if (import.meta.main) {
  if (process.argv.includes('--sandbox-worker')) await (await import('./sandbox/index.ts')).runSandboxWorker();
  else {
    await cli();
    // A serving process that could not start: its IPC channel to the supervisor would keep it alive.
    if (process.env.SWITCHYARD_SERVING) process.exit(process.exitCode);
  }
}
