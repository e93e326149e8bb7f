/**
 * The `switchyard` command tree. Each group lives in src/cli/<group>.ts and is loaded on demand,
 * so `switchyard --help` stays fast. The program's entry is src/main.ts.
 */
import { defineCommand } from 'citty';
import { run } from './run.ts';
import { VERSION } from '../version.ts';

export const main = defineCommand({
  meta: { name: 'switchyard', version: VERSION, description: 'Integration runtime and durable webhook delivery' },
  subCommands: {
    init: () => import('./init.ts').then((m) => m.default),
    serve: () => import('./serve.ts').then((m) => m.default),
    new: () => import('./new.ts').then((m) => m.default),
    check: () => import('./check.ts').then((m) => m.default),
    gitbook: () => import('./gitbook.ts').then((m) => m.default),
    integrations: () => import('./integrations.ts').then((m) => m.default),
    install: () => import('./installations.ts').then((m) => m.install),
    installations: () => import('./installations.ts').then((m) => m.default),
    events: () => import('./events.ts').then((m) => m.default),
    deliveries: () => import('./deliveries.ts').then((m) => m.default),
    logs: () => import('./logs.ts').then((m) => m.default),
    retention: () => import('./retention.ts').then((m) => m.default),
    backup: () => import('./backup.ts').then((m) => m.backup),
    restore: () => import('./backup.ts').then((m) => m.restore),
    store: () => import('./store.ts').then((m) => m.default),
    receive: () => import('./receive.ts').then((m) => m.default),
    sign: () => import('./sign.ts').then((m) => m.sign),
    verify: () => import('./sign.ts').then((m) => m.verify),
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
