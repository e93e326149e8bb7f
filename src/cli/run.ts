/**
 * Running the command tree: `--help` and `--version` at every level, and exit codes users can rely
 * on: 0 ok, 1 the operation failed, 2 bad usage or bad input (config, arguments).
 */
import { runCommand, showUsage, type CommandDef } from 'citty';
import { SwitchyardError, formatError } from '../errors.ts';
import { VERSION } from '../version.ts';

export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

/** Errors that mean "you asked wrongly" rather than "it failed". */
const usageCodes = new Set([
  'config_invalid',
  'config_env_missing',
  'data_dir_unwritable',
  'data_dir_locked',
  'port_in_use',
  'listen_failed',
  'bad_request',
  'validation_failed',
  'manifest_invalid',
]);

async function resolveTarget(cmd: CommandDef<any>, args: string[]): Promise<[CommandDef<any>, CommandDef<any> | undefined]> {
  let current = cmd;
  let parent: CommandDef<any> | undefined;
  for (const a of args) {
    if (a.startsWith('-')) continue;
    const subs = typeof current.subCommands === 'function' ? await current.subCommands() : await current.subCommands;
    const next = subs?.[a];
    if (!next) break;
    parent = current;
    current = await (typeof next === 'function' ? (next as () => Promise<CommandDef<any>>)() : next);
  }
  return [current, parent];
}

export async function run(cmd: CommandDef<any>, argv: string[]): Promise<number> {
  if (argv.includes('--version') || (argv.length === 1 && argv[0] === '-v')) {
    process.stdout.write(`${VERSION}\n`);
    return EXIT_OK;
  }
  if (argv.includes('--help') || argv.includes('-h') || argv.length === 0) {
    const [target, parent] = await resolveTarget(cmd, argv);
    await showUsage(target, parent);
    return argv.length === 0 ? EXIT_USAGE : EXIT_OK;
  }
  try {
    const result = await runCommand(cmd, { rawArgs: argv });
    if (typeof result.result === 'number') return result.result;
    // citty does not hand back a subcommand's return value: a subcommand sets process.exitCode.
    return typeof process.exitCode === 'number' ? process.exitCode : EXIT_OK;
  } catch (err) {
    if (err instanceof SwitchyardError) {
      process.stderr.write(`switchyard: ${formatError(err)}\n`);
      return usageCodes.has(err.code) ? EXIT_USAGE : EXIT_FAILURE;
    }
    if ((err as { name?: string }).name === 'CLIError') {
      const [target, parent] = await resolveTarget(cmd, argv);
      await showUsage(target, parent);
      process.stderr.write(`switchyard: ${(err as Error).message}\n`);
      return EXIT_USAGE;
    }
    process.stderr.write(`switchyard: unexpected error: ${(err as Error)?.stack ?? String(err)}\n`);
    return EXIT_FAILURE;
  }
}
