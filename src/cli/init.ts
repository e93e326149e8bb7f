/**
 * `switchyard init [folder]`: what the executable alone needs to start from: the commented
 * config.yaml (every key with its default and what it does: the same text as the config.yaml of
 * the source tree, src/config/template.ts) and an empty integrations folder. It never overwrites a
 * config.yaml (no --force: a configuration is moved aside by hand); `--print` writes the text to
 * stdout instead, to compare with one already there.
 */
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { defineCommand } from 'citty';
import { DEFAULT_CONFIG_FILE, loadConfig } from '../config/index.ts';
import { configTemplate } from '../config/template.ts';
import { SwitchyardError } from '../errors.ts';
import { displayPath } from '../manifest/index.ts';
import { selfCommand, shellWord } from './invocation.ts';
import { green } from './table.ts';

export default defineCommand({
  meta: { name: 'init', description: 'Write a commented config.yaml (every key with its default) and an integrations folder; never overwrites' },
  args: {
    folder: { type: 'positional', required: false, description: 'where to write them (default: the current folder)' },
    print: { type: 'boolean', description: 'print the commented config.yaml to stdout instead, writing nothing', default: false },
  },
  async run({ args }) {
    const text = configTemplate();
    if (args.print) {
      process.stdout.write(text);
      return 0;
    }
    const folder = resolve(args.folder ?? '.');
    const file = join(folder, DEFAULT_CONFIG_FILE);
    if (existsSync(file))
      throw new SwitchyardError('conflict', `${file} already exists: init never overwrites a configuration`, {
        hint: `edit it, or move it aside and run init again; \`${selfCommand()} init --print\` shows every key with its default to compare`,
        usage: true,
      });
    let made: boolean;
    let integrations = '';
    let wrote = false;
    try {
      mkdirSync(folder, { recursive: true });
      writeFileSync(file, text, { flag: 'wx' });
      wrote = true;
      // Its folder as the file names it (integrations_dir, relative to config.yaml).
      integrations = loadConfig({ path: file, env: {} }).integrations_dir;
      made = !existsSync(integrations);
      mkdirSync(integrations, { recursive: true });
    } catch (e) {
      // All or nothing: no config.yaml whose integrations folder could not be made.
      if (wrote) rmSync(file, { force: true });
      const code = (e as NodeJS.ErrnoException).code;
      if (!code) throw e;
      const what = code === 'EEXIST' || code === 'ENOTDIR' ? 'a file is in the way' : code;
      throw new SwitchyardError('bad_request', `cannot write ${integrations ? `${integrations}/` : file} (${what})`, {
        hint: 'name a folder you can write: switchyard init <folder>',
      });
    }
    const here = resolve(folder) === process.cwd();
    process.stdout.write(
      [
        `${green('wrote')} ${displayPath(file)}  every key with its default, commented`,
        made ? `${green('made')}  ${displayPath(integrations)}/  one folder per integration` : `  ${displayPath(integrations)}/ is there already`,
        '',
        `Next: ${here ? '' : `cd ${shellWord(displayPath(folder))} && `}${selfCommand()} serve`,
        `      ${selfCommand()} new <name>   (an integration, served as soon as it is written)`,
        '',
      ].join('\n'),
    );
    return 0;
  },
});
