/**
 * `switchyard integrations list|show <name>`: what the running server has loaded, with every
 * error and warning of each folder.
 */
import { defineCommand } from 'citty';
import { formatProblems, type Problem } from '../errors.ts';
import type { LinkAnswer } from '../installations/index.ts';
import type { IntegrationView } from '../registry/index.ts';
import { apiClient } from './client.ts';
import { configArg, configFrom, jsonArg } from './common.ts';
import { dim, green, printJson, red, table, yellow } from './table.ts';

function statusText(i: IntegrationView): string {
  if (i.parked) return red('parked');
  if (i.status === 'loaded') return green('loaded');
  if (i.status === 'needs_configuration') return yellow('needs configuration');
  if (i.status === 'loading') return yellow('loading');
  return i.serving ? `${red('error')} ${dim(`(serving ${i.version ?? 'the last good version'})`)}` : red('error');
}

const list = defineCommand({
  meta: { name: 'list', description: 'List the integrations the server has loaded, and those that failed' },
  args: { ...configArg, ...jsonArg },
  async run({ args }) {
    const api = apiClient(configFrom(args));
    const answer = await api.get<{ integrations: IntegrationView[] }>('/api/v1/integrations');
    // The API's answer as it is, as every other list prints ({installations}, {deliveries, nextCursor}...).
    if (args.json) {
      printJson(answer);
      return 0;
    }
    const { integrations } = answer;
    if (!integrations.length) {
      process.stdout.write('no integrations: add a folder to integrations_dir (`switchyard new <name>` creates one)\n');
      return 0;
    }
    process.stdout.write(
      `${table(
        ['name', 'status', 'version', 'title', 'problems'],
        integrations.map((i) => [
          i.name,
          statusText(i),
          i.version ?? (i.serving ? dim('no script') : ''),
          i.title ?? '',
          [
            i.errors.length ? red(`${i.errors.length} error${i.errors.length === 1 ? '' : 's'}`) : '',
            i.warnings.length ? yellow(`${i.warnings.length} warning${i.warnings.length === 1 ? '' : 's'}`) : '',
          ]
            .filter(Boolean)
            .join(', '),
        ]),
      )}\n`,
    );
    if (integrations.some((i) => i.errors.length)) process.stdout.write(dim('see the errors with `switchyard integrations show <name>`\n'));
    return 0;
  },
});

function problems(title: string, ps: Problem[]): string {
  return ps.length ? `\n${title}:\n${formatProblems(ps)}` : '';
}

const show = defineCommand({
  meta: { name: 'show', description: 'Show one integration: manifest summary, scopes, blocks, configuration, errors' },
  args: {
    name: { type: 'positional', required: true, description: 'integration name (or folder name)' },
    ...configArg,
    ...jsonArg,
  },
  async run({ args }) {
    const api = apiClient(configFrom(args));
    const { integration: i } = await api.get<{ integration: IntegrationView }>(`/api/v1/integrations/${encodeURIComponent(args.name)}`);
    if (args.json) {
      printJson(i);
      return 0;
    }
    const lines: string[] = [];
    lines.push(`${i.name}${i.title ? `  ${i.title}` : ''}`);
    lines.push(`  status      ${statusText(i)}`);
    if (i.parked) lines.push(`  parked      ${i.parked.reason} (since ${i.parked.since})`);
    lines.push(`  folder      ${i.dir}`);
    if (i.serving) {
      lines.push(`  version     ${i.version ?? 'no script (manifest only)'}`);
      lines.push(`  loaded at   ${i.loadedAt}`);
    }
    if (i.manifest) {
      const m = i.manifest;
      lines.push(`  about       ${m.description}`);
      lines.push(`  owner       ${m.organization} (${m.visibility})`);
      if (m.script) lines.push(`  script      ${m.script}`);
      if (m.categories.length) lines.push(`  categories  ${m.categories.join(', ')}`);
      if (m.secrets.length) lines.push(`  secrets     ${m.secrets.join(', ')}`);
      for (const l of m.externalLinks) lines.push(`  link        ${l.label}: ${l.url}`);
    }
    if (i.scopes.length) lines.push(`  scopes      ${i.scopes.join(', ')}`);
    for (const b of i.blocks) lines.push(`  block       ${b.id}: ${b.title}${b.description ? dim(` - ${b.description}`) : ''}`);
    for (const target of ['account', 'space', 'site'] as const) {
      const def = i.configurations[target];
      if (!def) continue;
      const required = new Set(def.required ?? []);
      lines.push(`\n${target} configuration:`);
      lines.push(
        table(
          ['property', 'type', 'required', 'default', 'description'],
          Object.entries(def.properties ?? {}).map(([name, p]) => [
            name,
            p.type === 'string' && p.enum ? `${p.type} (${p.enum.join('|')})` : p.type === 'button' ? `button -> ${p.callback_url}` : p.type,
            required.has(name) ? 'yes' : '',
            'default' in p && p.default !== undefined ? JSON.stringify(p.default) : '',
            `${p.title}: ${p.description}`,
          ]),
        )
          .split('\n')
          .map((l) => `  ${l}`)
          .join('\n'),
      );
    }
    process.stdout.write(`${lines.join('\n')}${problems('errors', i.errors)}${problems('warnings', i.warnings)}\n`);
    return 0;
  },
});

const resume = defineCommand({
  meta: { name: 'resume', description: 'Run a parked integration again (parked: its code took down a serving process 3 times within a minute)' },
  args: {
    name: { type: 'positional', required: true, description: 'integration name' },
    ...configArg,
    ...jsonArg,
  },
  async run({ args }) {
    const api = apiClient(configFrom(args));
    const { integration } = await api.post<{ integration: IntegrationView }>(`/api/v1/integrations/${encodeURIComponent(args.name)}/resume`, {});
    if (args.json) printJson(integration);
    else process.stdout.write(`${integration.name} resumed: its invocations run again\n`);
    return 0;
  },
});

const link = defineCommand({
  meta: {
    name: 'link',
    description: 'Print an install link of an integration (how an unlisted one is installed without the admin token), or --revoke every link made so far',
  },
  args: {
    name: { type: 'positional', required: true, description: 'integration name' },
    expires: { type: 'string', description: 'how long the link works: 1h, 7d (default), up to 90d', valueHint: 'duration' },
    revoke: { type: 'boolean', description: 'end every install link of the integration made so far (installations made with them stay)', default: false },
    ...configArg,
    ...jsonArg,
  },
  async run({ args }) {
    const config = configFrom(args);
    const api = apiClient(config);
    const path = `/api/v1/integrations/${encodeURIComponent(args.name)}/links`;
    if (args.revoke) {
      const r = await api.delete<{ integration: string; revokedAt: string }>(path);
      if (args.json) printJson(r);
      else process.stdout.write(`every install link of ${r.integration} made before ${r.revokedAt} is revoked; installations made with them stay\n`);
      return 0;
    }
    const r = await api.post<LinkAnswer>(path, args.expires ? { expires: args.expires } : {});
    if (args.json) {
      printJson(r);
      return 0;
    }
    // Where the link's holder reaches the server: the CLI's own URL (SWITCHYARD_URL, else public_url).
    const url = api.baseUrl;
    process.stdout.write(
      [
        `install link of ${r.integration} (${r.visibility}), works until ${r.expiresAt} (shown once):`,
        '',
        `  ${r.link}`,
        '',
        'Whoever holds it installs the integration on this server, with no admin token:',
        `  SWITCHYARD_URL=${url} switchyard install ${r.integration} --link <link> [--space <id> | --site <id>] [--set key=value ...]`,
        `  curl -X POST ${r.installUrl} -H 'authorization: Bearer <link>' -H 'content-type: application/json' -d '{"integration": "${r.integration}", "configuration": {}}'`,
        dim(`revoke it (and every other link of ${r.integration}): switchyard integrations link ${r.integration} --revoke`),
        '',
      ].join('\n'),
    );
    return 0;
  },
});

export default defineCommand({
  meta: { name: 'integrations', description: 'Inspect the integrations the running server has loaded, and make their install links' },
  subCommands: { list, show, resume, link },
});
