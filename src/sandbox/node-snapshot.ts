/**
 * isolated-vm needs Node started with `--no-node-snapshot` (its maintainer's requirement on Node
 * >= 20: with Node's start-up snapshot, shared-heap crashes are reported). Only a process that runs
 * isolates needs it; it doubles Node's start-up (~0.15 s against ~0.3 s of CPU for a CLI command
 * here), so commands that never run guest code may be started without it.
 */
import { SwitchyardError } from '../errors.ts';

export const NO_SNAPSHOT = '--no-node-snapshot';

/** Node was started without its snapshot: on the command line, or in NODE_OPTIONS. */
export function snapshotOff(execArgv = process.execArgv, nodeOptions = process.env.NODE_OPTIONS ?? ''): boolean {
  return [...execArgv, ...nodeOptions.split(/\s+/)].some((a) => a === NO_SNAPSHOT || a === '--no_node_snapshot');
}

/** Refuse to run isolates in a process started with Node's snapshot, saying how to start it. */
export function requireSnapshotOff(): void {
  if (snapshotOff()) return;
  throw new SwitchyardError(
    'node_options_invalid',
    `this process runs integrations in isolates, and isolated-vm needs Node started with ${NO_SNAPSHOT}: this one was not`,
    {
      hint: `start it with \`node ${NO_SNAPSHOT} src/main.ts ...\` (as \`npm start\` and \`npm run switchyard\` do), or add ${NO_SNAPSHOT} to NODE_OPTIONS`,
    },
  );
}
