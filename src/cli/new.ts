/**
 * `switchyard new <name>`: a working integration folder (manifest, a script with a component, an
 * event handler and a fetch handler, type declarations of the runtime library for editors). It
 * passes `switchyard check` and serves as soon as it lands in the integrations folder.
 *
 * `switchyard new --example <name>`: one of the integrations shipped with the program, written out
 * as it is (the executable carries them; see registry/shipped.ts).
 */
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { defineCommand } from 'citty';
import { SwitchyardError } from '../errors.ts';
import { displayPath, NAME_HINT, NAME_MAX, NAME_PATTERN } from '../manifest/index.ts';
import { BUILTIN_INTEGRATIONS, prepareFolder, SHIPPED_INTEGRATIONS, shippedFiles } from '../registry/index.ts';
import { closest } from '../schema/suggest.ts';
import { parseYaml } from '../schema/yaml.ts';
import { configArg, configFrom } from './common.ts';
import { selfCommand, shellWord } from './invocation.ts';
import { dim, green } from './table.ts';

export const TYPES_FILE = 'types/switchyard-runtime.d.ts';

function titleOf(name: string): string {
  const words = name.split('-').join(' ');
  return words.charAt(0).toUpperCase() + words.slice(1);
}

export function manifestTemplate(name: string, opts: { title: string; organization: string }): string {
  return `# The integration's manifest. \`switchyard check\` validates it and says what is wrong, where.
# For an integration that uses every kind of key (icon, preview images, links, every property
# type, completion_url), write out an example beside this one: switchyard new --example hello-components
name: ${name}
title: ${JSON.stringify(opts.title)}
description: ${JSON.stringify(`${opts.title}, made with switchyard new.`)}
organization: ${JSON.stringify(opts.organization)}
# private: only your organization can install it; unlisted: anyone with the link; public: anyone.
visibility: private
scopes:
  - space:content:read
script: src/index.tsx
# Blocks appear in the quick-insert menu; the id is the componentId of a component in the script.
blocks:
  - id: hello
    title: Hello
    description: A block with a button that counts its presses
# Settings of each installation: types string (optionally enum or completion_url), number,
# boolean, button (an OAuth connection); a default is stored when none is given.
configurations:
  account:
    properties:
      greeting:
        type: string
        title: Greeting
        description: Text the block shows
        default: Hello
# secrets:
#   API_KEY: \${{ env.MY_API_KEY }}   # read as context.environment.secrets.API_KEY; set MY_API_KEY in .env
`;
}

export const scriptTemplate = `import { createComponent, createIntegration } from '@switchyard/runtime';

/** A block: its state lives with the block; an action returns the next state. */
const hello = createComponent({
  componentId: 'hello',
  initialState: () => ({ presses: 0 }),
  action: async (element: { state: { presses: number } }, action: { action: string }) => {
    if (action.action === 'press') return { state: { presses: element.state.presses + 1 } };
    return {};
  },
  render: async (element: { state: { presses: number } }, context: any) => {
    const greeting = context.environment.installation?.configuration?.greeting ?? 'Hello';
    return (
      <block>
        <text>
          {greeting}! Pressed {element.state.presses} times.
        </text>
        <button label="Press" onPress={{ action: 'press' }} />
      </block>
    );
  },
});

export default createIntegration({
  components: [hello],

  /** Platform events this integration handles. */
  events: {
    space_content_updated: async (event: any) => {
      console.log(\`space \${event.spaceId} changed (revision \${event.revisionId})\`);
    },
  },

  /** Requests to the installation's public endpoint. */
  fetch: async (request: Request) => {
    if (request.method !== 'POST') return new Response('Method not allowed', { status: 405 });
    return Response.json({ received: true });
  },
});
`;

export const tsconfigTemplate = `${JSON.stringify(
  {
    compilerOptions: {
      target: 'es2022',
      module: 'esnext',
      moduleResolution: 'bundler',
      lib: ['es2022', 'dom'],
      jsx: 'react-jsx',
      jsxImportSource: '@switchyard/runtime',
      strict: true,
      noEmit: true,
      allowImportingTsExtensions: true,
      skipLibCheck: true,
      types: [],
    },
    include: ['src', 'types'],
  },
  null,
  2,
)}\n`;

function packageTemplate(name: string): string {
  return `${JSON.stringify({ name, private: true, type: 'module', description: 'A Switchyard integration: npm packages installed here are bundled into its script' }, null, 2)}\n`;
}

/**
 * The runtime library's type declarations, from the sandbox (read beside its source, or embedded
 * in the executable at build time).
 */
export async function runtimeTypes(): Promise<string | undefined> {
  try {
    return (await import('../sandbox/index.ts')).runtimeTypes();
  } catch {
    return undefined;
  }
}

/** The shipped examples, one line each: name and description (from its manifest). */
export function exampleList(): string[] {
  const width = Math.max(...SHIPPED_INTEGRATIONS.map((n) => n.length));
  return SHIPPED_INTEGRATIONS.map((name) => {
    const text = shippedFiles(name)?.get('platform-manifest.yaml')?.toString('utf8') ?? '';
    // Read as plain YAML: an example whose secrets are unset is still worth listing.
    const doc = parseYaml(text, name).value as { description?: unknown } | null;
    const description = typeof doc?.description === 'string' ? doc.description : '';
    const builtin = (BUILTIN_INTEGRATIONS as readonly string[]).includes(name) ? ' (built in: a copy of it overrides the built-in one)' : '';
    return `  ${name.padEnd(width)}  ${description}${builtin}`;
  });
}

/**
 * Write a folder beside `target` and rename it into place in one step, so a watching server never
 * sees half a folder. Nothing is left behind when `fill` throws.
 */
export async function writeFolder(target: string, fill: (staging: string) => Promise<void>): Promise<void> {
  if (existsSync(target))
    throw new SwitchyardError('conflict', `${displayPath(target)} already exists`, { hint: 'pick another name (or --dir), or remove the folder first' });
  const parent = dirname(target);
  mkdirSync(parent, { recursive: true });
  // Staged inside a fresh private folder of a new name (mkdtemp): a name known in advance (a pid)
  // could already be a link to elsewhere, and the files would be written there. The folder itself
  // is made inside it with the usual permissions (mkdtemp's are the owner's only).
  const scratch = mkdtempSync(join(parent, `.new-${basename(target)}-`));
  try {
    const staging = join(scratch, basename(target));
    mkdirSync(staging);
    await fill(staging);
    renameSync(staging, target);
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** `new --example <name>`: the shipped folder's files, as they are. */
async function writeExample(example: string, parent: string): Promise<number> {
  if (!example) {
    process.stdout.write(['Examples (switchyard new --example <name>):', ...exampleList(), ''].join('\n'));
    return 0;
  }
  const files = shippedFiles(example);
  if (!files) {
    process.stderr.write(['Examples (switchyard new --example <name>):', ...exampleList(), ''].join('\n'));
    const guess = closest(example, SHIPPED_INTEGRATIONS);
    throw new SwitchyardError('bad_request', `there is no example "${example}"`, {
      hint: guess ? `did you mean --example ${guess}?` : `pick one of: ${SHIPPED_INTEGRATIONS.join(', ')}`,
      where: '--example',
    });
  }
  const target = join(parent, example);
  await writeFolder(target, async (staging) => {
    for (const [path, bytes] of files) {
      mkdirSync(dirname(join(staging, path)), { recursive: true });
      writeFileSync(join(staging, path), bytes);
    }
  });
  const shown = displayPath(target);
  const lines = [`${green('created')} ${shown}/ (the ${example} example)`, ...[...files.keys()].map((p) => `  ${p}`), ''];
  if ((BUILTIN_INTEGRATIONS as readonly string[]).includes(example))
    lines.push(`This folder now overrides the built-in ${example} integration (the server says so when it starts); remove it to go back.`);
  if (files.has('.env.example')) lines.push(`Its secrets come from the environment: copy ${shown}/.env.example to ${shown}/.env and fill it in.`);
  lines.push(`A running server picks it up now. Check it any time with: ${selfCommand()} check ${shellWord(shown)}`, '');
  process.stdout.write(lines.join('\n'));
  return 0;
}

export default defineCommand({
  meta: { name: 'new', description: 'Create a working integration folder (manifest, script, type declarations), or write out a shipped example' },
  args: {
    name: { type: 'positional', required: false, description: 'integration name: lowercase words joined by hyphens' },
    example: { type: 'string', description: 'write out a shipped example instead (no name: list them)', valueHint: 'example' },
    dir: { type: 'string', description: 'parent folder (default: integrations_dir from config.yaml)', valueHint: 'path' },
    title: { type: 'string', description: 'title shown in the platform (default: from the name)' },
    organization: { type: 'string', description: 'owning organization id or subdomain', default: 'my-organization' },
    ...configArg,
  },
  async run({ args }) {
    const parentOf = () => resolve(args.dir ?? configFrom(args).integrations_dir);
    if (args.example !== undefined) {
      if (args.name)
        throw new SwitchyardError('bad_request', `an example is written under its own name; drop "${args.name}"`, {
          hint: `switchyard new --example ${args.example || '<example>'}`,
        });
      return writeExample(args.example, parentOf());
    }
    const name = args.name;
    if (!name)
      throw new SwitchyardError('bad_request', 'name the integration to create', {
        hint: 'switchyard new <name> (lowercase words joined by hyphens), or switchyard new --example to list the examples',
      });
    if (!NAME_PATTERN.test(name) || name.length > NAME_MAX)
      throw new SwitchyardError('bad_request', `"${name}" is not a valid integration name`, { hint: NAME_HINT });
    const target = join(parentOf(), name);
    const types = await runtimeTypes();
    await writeFolder(target, async (staging) => {
      mkdirSync(join(staging, 'src'), { recursive: true });
      writeFileSync(join(staging, 'platform-manifest.yaml'), manifestTemplate(name, { title: args.title ?? titleOf(name), organization: args.organization }));
      writeFileSync(join(staging, 'src/index.tsx'), scriptTemplate);
      writeFileSync(join(staging, 'tsconfig.json'), tsconfigTemplate);
      writeFileSync(join(staging, 'package.json'), packageTemplate(name));
      writeFileSync(join(staging, '.gitignore'), 'node_modules/\n.env\n');
      if (types) {
        mkdirSync(join(staging, 'types'), { recursive: true });
        writeFileSync(join(staging, TYPES_FILE), types);
      }
      const check = await prepareFolder(staging, { env: process.env, label: displayPath(target) });
      if (!check.prepared) throw new SwitchyardError('internal', 'the new integration does not pass its own check', { problems: check.errors });
    });

    const shown = displayPath(target);
    process.stdout.write(
      [
        `${green('created')} ${shown}/`,
        `  platform-manifest.yaml  the manifest`,
        `  src/index.tsx           a component ("hello" block), an event handler and a fetch handler`,
        types
          ? `  ${TYPES_FILE}  the runtime library's types (tsconfig.json points editors at them)`
          : dim('  (this build has no type declarations of the runtime library to copy)'),
        '',
        `A running server picks it up now. Check it any time with: ${selfCommand()} check ${shellWord(shown)}`,
        `More complete examples: ${selfCommand()} new --example`,
        '',
      ].join('\n'),
    );
    return 0;
  },
});
