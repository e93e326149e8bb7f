/**
 * Running the command tree: `--help` and `--version` at every level, and exit codes users can rely
 * on: 0 ok, 1 the operation failed, 2 bad usage or bad input (config, arguments).
 */
import { renderUsage, runCommand, type CommandDef } from 'citty';
import { SwitchyardError, formatError, isUsageError } from '../errors.ts';
import { closest } from '../schema/suggest.ts';
import { VERSION } from '../version.ts';
import { useColour } from './table.ts';

export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

type AnyCommand = CommandDef<any>;

async function value<T>(v: T | (() => T | Promise<T>) | Promise<T>): Promise<T> {
  return typeof v === 'function' ? await (v as () => T | Promise<T>)() : await v;
}

/**
 * The command argv names; what its usage names it under (`switchyard deliveries` for `list`: citty
 * names a command after its direct parent alone); and the first word of argv that names no command.
 */
async function resolveTarget(cmd: AnyCommand, args: string[]): Promise<[AnyCommand, AnyCommand | undefined, string | undefined]> {
  let current = cmd;
  const path: string[] = [];
  const under = (): AnyCommand | undefined => (path.length ? { meta: { name: [PROGRAM, ...path.slice(0, -1)].join(' '), version: VERSION } } : undefined);
  for (const a of args) {
    if (a === '--') break;
    if (a.startsWith('-')) continue;
    const subs = await value(current.subCommands);
    if (!subs) break;
    const next = subs[a];
    if (!next) return [current, under(), a];
    path.push(a);
    current = await value(next as AnyCommand);
  }
  return [current, under(), undefined];
}

const PROGRAM = 'switchyard';

/**
 * What a mistyped command name may have meant: the closest command at that level, else a command
 * one level down (`switchyard replay` is `deliveries replay` or `events replay`), exact names first.
 */
async function commandGuesses(word: string, subs: Record<string, unknown>): Promise<string[]> {
  const here = closest(word, Object.keys(subs));
  if (here) return [here];
  const exact: string[] = [];
  const near: string[] = [];
  for (const [name, sub] of Object.entries(subs)) {
    const inner = await value((await value(sub as AnyCommand)).subCommands);
    if (!inner) continue;
    if (Object.hasOwn(inner, word)) exact.push(`${name} ${word}`);
    else {
      const guess = closest(word, Object.keys(inner));
      if (guess) near.push(`${name} ${guess}`);
    }
  }
  return exact.length ? exact : near;
}

/** `"a"`, `"a" or "b"`, `"a", "b" or "c"`. */
function alternatives(words: string[]): string {
  const quoted = words.map((w) => `"${w}"`);
  return quoted.length < 2 ? quoted.join('') : `${quoted.slice(0, -1).join(', ')} or ${quoted.at(-1)}`;
}

/** citty colours its usage text whenever CI/NO_COLOR are unset: strip it when the stream is no terminal. */
const ANSI = /\x1b\[[0-9;]*m/g;
function plain(text: string, stream: NodeJS.WriteStream): string {
  return useColour(stream) ? text : text.replace(ANSI, '');
}

/**
 * citty's usage, tidied: no "(Default: x)" after a description that already gives its default
 * ("(default 9000) (Default: 9000)"), and no padding after the last column (citty pads it counting
 * the grey hint's colour codes, so those lines ended shorter and wrapped apart on a narrow terminal).
 */
async function usageText(cmd: AnyCommand, parent: AnyCommand | undefined): Promise<string> {
  const args = (await value(cmd.args)) as Record<string, { description?: string; default?: unknown; required?: boolean }> | undefined;
  const said = (d: { description?: string; default?: unknown }) => d.default !== undefined && /\bdefault\b/i.test(d.description ?? '');
  // Without its default an argument must not turn "(Required)": it never was.
  const shown = args
    ? { ...cmd, args: Object.fromEntries(Object.entries(args).map(([k, d]) => [k, said(d) ? { ...d, default: undefined, required: false } : d])) }
    : cmd;
  return (await renderUsage(shown, parent)).replace(/[ \t]+((?:\x1b\[[0-9;]*m)*)$/gm, '$1');
}

async function printUsage(cmd: AnyCommand, parent: AnyCommand | undefined): Promise<void> {
  process.stdout.write(`${plain(await usageText(cmd, parent), process.stdout)}\n\n`);
}

/**
 * A flag the command does not declare is an error, with the closest declared one as a hint
 * (`--statsu failed` silently listed everything before).
 */
async function unknownFlag(cmd: AnyCommand, argv: string[]): Promise<SwitchyardError | undefined> {
  const defs = (await value(cmd.args)) ?? {};
  const known = new Set<string>(['help', 'h', 'version', 'v']);
  for (const [name, def] of Object.entries(defs as Record<string, { alias?: string | string[]; type?: string }>)) {
    if (def.type === 'positional') continue;
    known.add(name);
    for (const a of [def.alias ?? []].flat()) known.add(a);
  }
  for (const arg of argv) {
    if (arg === '--') break;
    if (!arg.startsWith('-') || arg === '-') continue;
    let name = arg.replace(/^--?/, '').split('=')[0];
    if (name.startsWith('no-') && known.has(name.slice(3))) continue;
    // Single-dash clusters (-fv) are each a short alias.
    if (!arg.startsWith('--') && name.length > 1 && [...name].every((c) => known.has(c))) continue;
    if (known.has(name)) continue;
    name = arg.startsWith('--') ? `--${name}` : `-${name}`;
    const guess = closest(
      name.replace(/^-+/, ''),
      [...known].filter((k) => k.length > 1),
    );
    return new SwitchyardError('bad_request', `unknown option ${name}`, {
      hint: guess ? `did you mean --${guess}? (see --help)` : 'see --help for the options of this command',
      where: name,
    });
  }
  return undefined;
}

export async function run(cmd: CommandDef<any>, argv: string[]): Promise<number> {
  if (argv.includes('--version') || (argv.length === 1 && argv[0] === '-v')) {
    process.stdout.write(`${VERSION}\n`);
    return EXIT_OK;
  }
  const [target, parent, stray] = await resolveTarget(cmd, argv);
  // Checked before --help: `switchyard delivries --help` must not answer with the parent's help, exit 0.
  const subs = await value(target.subCommands);
  if (stray !== undefined && subs && !target.run) {
    // The guess first, then the names to choose from in one line: not the whole help.
    const guesses = await commandGuesses(stray, subs);
    const here = [parent ? (await value(parent.meta))?.name : undefined, parent ? (await value(target.meta))?.name : PROGRAM].filter(Boolean).join(' ');
    process.stderr.write(
      `${PROGRAM}: unknown command "${stray}"${guesses.length ? `; did you mean ${alternatives(guesses)}?` : ''}\n` +
        `the commands of ${here}: ${Object.keys(subs).join(', ')} (\`${here} --help\` says what each does)\n`,
    );
    return EXIT_USAGE;
  }
  if (argv.includes('--help') || argv.includes('-h') || argv.length === 0) {
    await printUsage(target, parent);
    return argv.length === 0 ? EXIT_USAGE : EXIT_OK;
  }
  const bad = await unknownFlag(target, argv);
  if (bad) {
    process.stderr.write(`switchyard: ${formatError(bad)}\n`);
    return EXIT_USAGE;
  }
  try {
    const result = await runCommand(cmd, { rawArgs: argv });
    if (typeof result.result === 'number') return result.result;
    // citty does not hand back a subcommand's return value: a subcommand sets process.exitCode.
    return typeof process.exitCode === 'number' ? process.exitCode : EXIT_OK;
  } catch (err) {
    if (err instanceof SwitchyardError) {
      process.stderr.write(`switchyard: ${formatError(err)}\n`);
      return err.usage || isUsageError(err.code) ? EXIT_USAGE : EXIT_FAILURE;
    }
    if ((err as { name?: string }).name === 'CLIError') {
      await printUsage(target, parent);
      process.stderr.write(`switchyard: ${plain((err as Error).message, process.stderr)}\n`);
      return EXIT_USAGE;
    }
    process.stderr.write(`switchyard: unexpected error: ${(err as Error)?.stack ?? String(err)}\n`);
    return EXIT_FAILURE;
  }
}
