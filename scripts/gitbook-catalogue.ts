/**
 * Runs GitBook's public integration catalogue through Switchyard the way a new user would, and
 * prints per integration: whether `switchyard check` passes, the main path tried, its outcome and,
 * when it fails, why.
 *
 *   node --no-node-snapshot scripts/gitbook-catalogue.ts <checkout of GitbookIO/integrations> [--only a,b] [--work <dir>] [--json]
 *
 * For each folder of `<checkout>/integrations`: a copy in a work folder (their code is never
 * changed), `npm install` of its `dependencies` (GitBook's `workspace:*` tooling left out), a `.env`
 * with a value for every variable its `secrets` read, then `switchyard check`. Then one
 * `switchyard serve` over the work folder, and for every integration whose handlers the spec
 * allows: `switchyard install` (on a space or a site when its manifest targets one), its components
 * rendered and their first action pressed (`@link.unfurl` with a matching URL for unfurling blocks),
 * its public endpoints fetched, every event it subscribes to sent with `switchyard events send`,
 * and the OAuth round trip of a `button` property (start, then the provider's redirect back with a
 * code, played by this script: the catalogue's providers are fixed third-party hosts).
 *
 * This machine may have no route to the third parties (GitHub, Slack, Figma...): a step that ends
 * at an outbound call to one counts as having run its path through Switchyard ("stopped at
 * <host>"), which is all a local run can prove. Not part of `npm test`: the catalogue is not in
 * this repository.
 */
import { spawn, execFileSync } from 'node:child_process';
import { createHmac, generateKeyPairSync, randomBytes } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { dependencySpecs, npmInstallArgs } from '../src/cli/gitbook.ts';

const ROOT = new URL('../', import.meta.url).pathname.replace(/\/$/, '');
const MAIN = join(ROOT, 'src/main.ts');

// ---------------------------------------------------------------------------------------------
// Facts about the catalogue the generic path cannot guess: example URLs that the blocks unfurl,
// requests its public endpoints answer. Written here, not taken from GitBook's code.

interface Request_ {
  /** `installation` (default) or `integration`: which public endpoint the path is under. */
  on?: 'installation' | 'integration';
  method?: string;
  path: string;
  body?: string;
  headers?: Record<string, string>;
  /** Sign the body as Slack does, with the SIGNING_SECRET the .env gave it. */
  slackSigned?: boolean;
  /** Sign the body as GitHub does (x-hub-signature-256), with the WEBHOOK_SECRET the .env gave it. */
  githubSigned?: boolean;
  /** What the step shows when it works. */
  what: string;
}

interface Plan {
  /** A URL matching the block's urlUnfurl, sent as the `@link.unfurl` action. */
  unfurl?: Record<string, string>;
  /** Props of a component's first render. */
  props?: Record<string, Record<string, unknown>>;
  requests?: Request_[];
  /** Configuration values for required properties the generic filler cannot guess. */
  configuration?: Record<string, unknown>;
  /** Where to install when the manifest says `all` (GitBook's webhook keeps event choices per space). */
  target?: 'space' | 'site';
  /** The action to press on a component, with the state a user would have typed (`$receiver`: this script's HTTP receiver). */
  actions?: Record<string, { action: Record<string, unknown>; state?: Record<string, unknown> }>;
  /**
   * Why steps after the stand-in credentials cannot go further here: what the real OAuth exchange
   * would have stored beside the credentials comes from the provider's own API. Their failures are
   * counted as stopped at that third party, with this reason shown.
   */
  stoppedBy?: string;
  /** Wait for a delivery at this script's receiver after the events: the integration sends them itself. */
  expectsDelivery?: boolean;
  /** externalIds its configuration screen would have stored (set through the API, as its code would). */
  externalIds?: string[];
  /** OAuth started from a path its settings screen links to, not from a `button` property. */
  oauthPaths?: string[];
}

const PLANS: Record<string, Plan> = {
  arcade: { unfurl: { embed: 'https://app.arcade.software/share/catalogueFlow1' } },
  figma: {
    unfurl: { embed: 'https://www.figma.com/file/AbCdEf123/Catalogue?node-id=1-2' },
    props: { previewModal: { url: 'https://www.figma.com/file/AbCdEf123/Catalogue' } },
  },
  'github-copilot': { oauthPaths: ['/oauth'] },
  'github-files': { unfurl: { 'github-code-block': 'https://github.com/octo-org/octo-repo/blob/main/README.md#L1-L5' } },
  'gitlab-files': { unfurl: { 'gitlab-code-block': 'https://gitlab.com/octo-org/octo-repo/-/blob/main/README.md' } },
  jira: { unfurl: { issue: 'https://catalogue.atlassian.net/browse/CAT-1' } },
  linear: { unfurl: { embed: 'https://linear.app/catalogue/issue/CAT-1/an-issue' } },
  lucid: { unfurl: { 'lucid-component': 'https://lucid.app/lucidchart/abcd-1234/edit' } },
  mailchimp: { stoppedBy: 'its api_endpoint comes from login.mailchimp.com/oauth2/metadata during the OAuth exchange' },
  webhook: {
    target: 'space',
    actions: {
      config: {
        action: { action: 'save.config' },
        state: { webhookUrl: '$receiver', secret: 'catalogue-webhook-secret-0123456789', space_content_updated: true },
      },
    },
    expectsDelivery: true,
  },
  runkit: { unfurl: { embed: 'https://runkit.com/catalogue/notebook' } },
  sentry: { unfurl: { embed: 'https://sentry.io/organizations/catalogue/issues/123/' } },
  toucantoco: { unfurl: { embed: 'https://catalogue.toucantoco.com/embed.html?id=1' } },
  slack: {
    requests: [
      {
        on: 'integration',
        method: 'POST',
        path: '/events',
        body: JSON.stringify({ type: 'url_verification', token: 'x', challenge: 'catalogue-challenge' }),
        headers: { 'content-type': 'application/json' },
        slackSigned: true,
        what: 'Slack url_verification answered with its challenge',
      },
    ],
  },
  discord: { requests: [{ on: 'integration', method: 'GET', path: '/', what: 'the integration endpoint answered' }] },
  github: {
    // What its configuration screen stores when a repository and branch are picked.
    externalIds: ['ins:4242:rep:77:br:refs/heads/main'],
    requests: [
      {
        on: 'integration',
        method: 'POST',
        path: '/hooks/github',
        body: JSON.stringify({
          ref: 'refs/heads/main',
          installation: { id: 4242 },
          repository: { id: 77 },
          head_commit: { timestamp: '2026-01-01T00:00:00Z' },
        }),
        headers: { 'content-type': 'application/json', 'x-github-event': 'push', 'x-github-delivery': 'catalogue-1' },
        githubSigned: true,
        what: 'a signed GitHub push webhook at the integration endpoint (space installations looked up with the integration token)',
      },
    ],
  },
  gitlab: {
    requests: [
      {
        on: 'installation',
        method: 'POST',
        path: '/hooks/gitlab',
        body: '{}',
        headers: { 'content-type': 'application/json', 'x-gitlab-event': 'Push Hook' },
        what: 'a GitLab webhook reached the installation endpoint',
      },
    ],
  },
  mermaid: { requests: [{ on: 'integration', method: 'GET', path: '/?v=1', what: 'the webframe page the block embeds' }] },
  plantuml: { requests: [{ on: 'integration', method: 'GET', path: '/?v=1', what: 'the webframe page the block embeds' }] },
};

// ---------------------------------------------------------------------------------------------

type Outcome = 'ran' | 'stopped at a third party' | 'needs GitBook content' | 'not run here' | 'failed';

interface Step {
  what: string;
  outcome: Outcome;
  detail: string;
}

interface Row {
  name: string;
  check: 'pass' | 'fail';
  checkErrors: string[];
  mainPath: string;
  outcome: Outcome | 'not run: check failed';
  reason: string;
  steps: Step[];
}

const args = process.argv.slice(2);
const flag = (name: string) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const checkout = args.find((a, i) => !a.startsWith('--') && !['--only', '--work'].includes(args[i - 1] ?? ''));
if (!checkout || !existsSync(join(checkout, 'integrations'))) {
  process.stderr.write(
    'usage: node --no-node-snapshot scripts/gitbook-catalogue.ts <checkout of GitbookIO/integrations> [--only a,b] [--work <dir>] [--json]\n',
  );
  process.exit(2);
}
const only = flag('--only')?.split(',').filter(Boolean);
const work = resolve(flag('--work') ?? join(tmpdir(), 'switchyard-gitbook-catalogue'));
const asJson = args.includes('--json');
const say = (line: string) => process.stderr.write(`${line}\n`);

// ---------------------------------------------------------------------------------------------
// Preparing the folders as a user would.

function prepare(): string[] {
  const source = join(resolve(checkout!), 'integrations');
  const dir = join(work, 'integrations');
  mkdirSync(dir, { recursive: true });
  const names = readdirSync(source, { withFileTypes: true })
    .filter((d) => d.isDirectory() && !d.name.startsWith('.'))
    .map((d) => d.name)
    .filter((n) => !only || only.includes(n))
    .sort();
  for (const name of names) {
    const target = join(dir, name);
    const modules = join(target, 'node_modules');
    const kept = join(work, 'npm', name, 'node_modules');
    if (existsSync(modules) && !existsSync(kept)) {
      mkdirSync(join(work, 'npm', name), { recursive: true });
      renameSync(modules, kept);
    }
    rmSync(target, { recursive: true, force: true });
    cpSync(join(source, name), target, { recursive: true, filter: (p) => !p.includes('/node_modules') && !p.endsWith('/.git') });
    installDependencies(name, target);
    writeEnv(target);
  }
  return names;
}

/** The folder's dependencies installed as `switchyard gitbook install` does (src/cli/gitbook.ts), kept beside it between runs, then copied in. */
function installDependencies(name: string, target: string): void {
  if (!existsSync(join(target, 'package.json'))) return;
  const deps = dependencySpecs(target).specs;
  if (!deps.length) return;
  const side = join(work, 'npm', name);
  const stamp = join(side, 'deps.txt');
  if (!existsSync(stamp) || readFileSync(stamp, 'utf8') !== deps.join('\n')) {
    rmSync(side, { recursive: true, force: true });
    mkdirSync(side, { recursive: true });
    writeFileSync(join(side, 'package.json'), JSON.stringify({ name: `catalogue-${name}`, private: true }));
    say(`npm install ${name}: ${deps.join(' ')}`);
    execFileSync('npm', npmInstallArgs(deps), { cwd: side, stdio: ['ignore', 'ignore', 'inherit'] });
    writeFileSync(stamp, deps.join('\n'));
  }
  cpSync(join(side, 'node_modules'), join(target, 'node_modules'), { recursive: true, verbatimSymlinks: true });
}

let privateKey: string | undefined;

/** A value for every variable the manifest's `secrets` read: URLs where a URL is expected, a real RSA key for private keys. */
function writeEnv(target: string): void {
  const manifest = readManifest(target);
  const lines: string[] = [];
  for (const [secret, ref] of Object.entries((manifest.secrets ?? {}) as Record<string, string>)) {
    for (const m of String(ref).matchAll(/\$\{\{\s*env\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g)) {
      const variable = m[1];
      let value = `catalogue-${secret.toLowerCase().replace(/_/g, '-')}`;
      if (/URL$/i.test(secret) || /URL$/i.test(variable)) value = `https://catalogue.example/${secret.toLowerCase()}`;
      if (/PRIVATE_KEY/i.test(secret)) {
        privateKey ??= generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
        value = JSON.stringify(privateKey);
      }
      lines.push(`${variable}=${value}`);
    }
  }
  if (lines.length) writeFileSync(join(target, '.env'), `${lines.join('\n')}\n`);
}

function readManifest(dir: string): Record<string, any> {
  const file = existsSync(join(dir, 'platform-manifest.yaml')) ? 'platform-manifest.yaml' : 'gitbook-manifest.yaml';
  return parseYaml(readFileSync(join(dir, file), 'utf8')) as Record<string, any>;
}

// ---------------------------------------------------------------------------------------------
// The CLI and the server.

function cli(argv: string[], timeoutMs = 60_000): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, ['--no-node-snapshot', MAIN, ...argv], {
      cwd: work,
      env: { ...process.env, NO_COLOR: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', fail);
    child.on('close', (code) => {
      clearTimeout(timer);
      done({ code, stdout, stderr });
    });
  });
}

function freePort(): Promise<number> {
  return new Promise((done) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => done(port));
    });
  });
}

let base = '';
let token = '';

/** A local HTTP receiver for what integrations send themselves (GitBook's webhook integration). */
const receiver = { url: '', received: [] as string[] };
async function startReceiver(): Promise<() => void> {
  const { createServer: http } = await import('node:http');
  const server = http((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      receiver.received.push(
        `${req.method} ${req.url} ${Object.keys(req.headers)
          .filter((h) => h.startsWith('x-'))
          .join(',')} ${body.slice(0, 80)}`,
      );
      res.end('ok');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  receiver.url = `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`;
  return () => server.close();
}

async function api(method: string, path: string, body?: unknown): Promise<{ status: number; body: any; headers: Headers }> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    /* text */
  }
  return { status: res.status, body: parsed, headers: res.headers };
}

async function serve(): Promise<() => void> {
  const port = await freePort();
  token = randomBytes(24).toString('base64url');
  base = `http://127.0.0.1:${port}`;
  rmSync(join(work, 'data'), { recursive: true, force: true });
  writeFileSync(
    join(work, 'config.yaml'),
    [
      'server:',
      '  host: 127.0.0.1',
      `  port: ${port}`,
      '  processes: 1',
      'data_dir: ./data',
      'integrations_dir: ./integrations',
      `admin_token: ${token}`,
      'log:',
      '  format: json',
      '  level: warn',
      'webhooks:',
      '  allow_private_networks: true',
      'sandbox:',
      // Room for cold isolates on a busy machine: this run is about behaviour, not limits.
      '  cpu_time: 5s',
      '  startup_time: 15s',
      '',
    ].join('\n'),
  );
  const child = spawn(process.execPath, ['--no-node-snapshot', MAIN, 'serve'], {
    cwd: work,
    env: { ...process.env, NO_COLOR: '1' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let log = '';
  child.stderr.on('data', (d) => (log += d));
  for (let i = 0; i < 600; i++) {
    try {
      if ((await fetch(`${base}/healthz`)).ok) break;
    } catch {
      /* not up yet */
    }
    if (child.exitCode !== null) throw new Error(`switchyard serve exited: ${log.slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return () => child.kill('SIGTERM');
}

// ---------------------------------------------------------------------------------------------
// Reading what happened.

const UNREACHABLE =
  /ENOTFOUND|EAI_AGAIN|getaddrinfo|could not resolve|Could not resolve host|ECONNREFUSED|ENETUNREACH|EHOSTUNREACH|fetch failed|network error|could not reach/i;

/** The invocation behind an answer (its x-request-id), as the logs API shows it. */
async function invocation(requestId: string | null): Promise<any | undefined> {
  if (!requestId) return undefined;
  const r = await api('GET', `/api/v1/logs/${encodeURIComponent(requestId)}`);
  return r.status === 200 ? r.body : undefined;
}

/** The hosts an invocation's failed outbound calls named (the third parties it could not reach). */
function thirdParty(text: string): string | undefined {
  if (!UNREACHABLE.test(text)) return undefined;
  const hosts = [...text.matchAll(/https?:\/\/([a-z0-9.-]+\.[a-z]{2,})/gi)].map((m) => m[1]).filter((h) => !h.endsWith('.invalid') && h !== '127.0.0.1');
  return hosts[0] ?? 'an outside host';
}

function textOf(inv: any, answer: unknown): string {
  const logs = (inv?.logs ?? []).map((l: any) => l.message).join('\n');
  return `${inv?.error?.message ?? ''}\n${logs}\n${typeof answer === 'string' ? answer : JSON.stringify(answer ?? '')}`;
}

/** One step's outcome from an HTTP answer and its invocation. */
function judge(what: string, status: number, answer: unknown, inv: any, expectOk = true): Step {
  const text = textOf(inv, answer);
  const host = thirdParty(text);
  if (/reads GitBook content, which this server does not hold|gitbook\.api_url/.test(text))
    return { what, outcome: 'needs GitBook content', detail: firstLine(text.match(/[^\n]*reads GitBook content[^\n]*/)?.[0] ?? 'GitBook content call') };
  if (host) return { what, outcome: 'stopped at a third party', detail: `${host} is not reachable from here` };
  // The integration caught the failed call and answered its own error: its message says so.
  const own = typeof answer === 'object' && answer ? String((answer as { error?: unknown }).error ?? '') : '';
  if (status >= 400 && status < 500 && /fail(ed)? to (fetch|get|load|retrieve)|could not (fetch|reach|load)|unable to (fetch|reach)/i.test(own))
    return { what, outcome: 'stopped at a third party', detail: `the integration's own call out failed: "${own}" (the invocation reached no outside host)` };
  if (status === 501) return { what, outcome: 'not run here', detail: firstLine(String((answer as any)?.error ?? answer)) };
  const fault = inv?.error && inv.error.kind !== 'http_error';
  if (fault || status >= 500 || (expectOk && status >= 400))
    return {
      what,
      outcome: 'failed',
      detail: firstLine(inv?.error?.message ?? `answered ${status}: ${typeof answer === 'string' ? answer : JSON.stringify(answer)}`),
    };
  return { what, outcome: 'ran', detail: `answered ${status}` };
}

const firstLine = (s: string) =>
  s
    .split('\n')
    .find((l) => l.trim())
    ?.trim()
    .slice(0, 300) ?? '';

// ---------------------------------------------------------------------------------------------
// The main path of one integration.

interface Exports {
  fetch: boolean;
  components: string[];
  events: string[];
  unsupported: Array<{ handler: string; reason: string }>;
}

/** A value a required property accepts (the first enum value, the default, or a plausible one). */
function fillConfiguration(section: any, given: Record<string, unknown> = {}): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of section?.required ?? []) {
    const p = section.properties?.[name];
    if (!p || p.type === 'button') continue;
    let v: unknown = given[name] ?? p.default ?? (p.enum ? p.enum[0] : undefined);
    if (v === undefined) v = p.type === 'number' ? 1 : p.type === 'boolean' ? true : /url/i.test(name) ? 'https://catalogue.example/' : `catalogue-${name}`;
    out[name] = String(v);
  }
  return out;
}

function targetOf(manifest: Record<string, any>): 'organization' | 'space' | 'site' {
  return manifest.target === 'space' || manifest.target === 'site' ? manifest.target : 'organization';
}

function sectionOf(manifest: Record<string, any>, target: string): any {
  const c = manifest.configurations ?? {};
  if (target === 'site') return c.site;
  if (target === 'space') return c.space ?? c.account;
  return c.account;
}

/** Every `onPress`/`onChange`-style action in rendered markup that is the component's own (not `@ui...`/`@editor...`). */
function ownActions(node: unknown, out: any[] = []): any[] {
  if (Array.isArray(node)) for (const n of node) ownActions(n, out);
  else if (node && typeof node === 'object') {
    for (const [k, v] of Object.entries(node)) {
      if (/^on[A-Z]/.test(k) && v && typeof v === 'object' && typeof (v as any).action === 'string' && !(v as any).action.startsWith('@')) out.push(v);
      else if (typeof v === 'object') ownActions(v, out);
    }
  }
  return out;
}

async function runMainPath(name: string, dir: string, exports: Exports): Promise<{ mainPath: string; steps: Step[] }> {
  const manifest = readManifest(dir);
  const manifestName = String(manifest.name);
  const plan = PLANS[name] ?? {};
  const target = plan.target ?? targetOf(manifest);
  const section = sectionOf(manifest, target);
  const steps: Step[] = [];
  const tried: string[] = [];

  // Install as a user would: `switchyard install`, on the space or site the manifest targets.
  const sets = Object.entries(fillConfiguration(section, plan.configuration)).flatMap(([k, v]) => ['--set', `${k}=${v}`]);
  const where = target === 'space' ? ['--space', 'space_catalogue'] : target === 'site' ? ['--site', 'site_catalogue'] : [];
  const installed = await cli(['install', manifestName, ...where, ...sets, '--json']);
  let inst: any;
  try {
    inst = JSON.parse(installed.stdout).installation;
  } catch {
    /* reported below */
  }
  if (installed.code !== 0 || !inst) {
    steps.push({ what: 'install', outcome: 'failed', detail: firstLine(installed.stderr || installed.stdout) });
    return { mainPath: 'install', steps };
  }
  tried.push(`install on ${target}`);
  if (plan.externalIds) {
    const set = await api('PATCH', `/api/v1/integrations/${encodeURIComponent(manifestName)}/installations/${inst.id}`, { externalIds: plan.externalIds });
    if (set.status !== 200) steps.push({ what: 'externalIds', outcome: 'failed', detail: JSON.stringify(set.body).slice(0, 300) });
    else tried.push(`externalIds ${plan.externalIds.join(',')}`);
  }
  const endpoint: string = inst.urls.publicEndpoint;
  const integrationEndpoint = `${base}/v1/integrations/${encodeURIComponent(manifestName)}/integration`;
  const context =
    target === 'site'
      ? { type: 'configuration_site', siteId: 'site_catalogue', theme: 'light' }
      : { type: 'document', spaceId: 'space_catalogue', editable: true, theme: 'light' };

  // OAuth: the button's callback starts the flow; this script plays the provider sending the
  // browser back. The providers' token endpoints are out of reach here, so the rest of the path
  // runs on stand-in credentials, set as a user could (`installations configure`).
  for (const path of plan.oauthPaths ?? []) {
    tried.push(`OAuth via ${path}`);
    steps.push(...(await oauthRoundTrip(`${endpoint}${path}`)));
  }
  for (const [prop, p] of Object.entries((section?.properties ?? manifest.configurations?.account?.properties ?? {}) as Record<string, any>)) {
    if (p.type !== 'button' || !p.callback_url) continue;
    tried.push(`OAuth via ${prop}`);
    steps.push(...(await oauthRoundTrip(`${endpoint}${p.callback_url}`)));
    const now = await api('GET', `/api/v1/installations/${inst.id}`);
    if (now.body?.installation?.configuration?.[prop] === undefined) {
      // Through the API: a button's value is a map the CLI does not take (it is the callback's to write).
      const standIn = { access_token: 'catalogue-stand-in-token', expires_at: Date.now() + 3_600_000 };
      const set = await api('PATCH', `/api/v1/installations/${inst.id}`, { configuration: { [prop]: standIn } });
      if (set.status === 200) {
        tried.push(`stand-in ${prop}`);
        inst = set.body.installation ?? inst;
      } else steps.push({ what: `stand-in ${prop}`, outcome: 'failed', detail: JSON.stringify(set.body).slice(0, 300) });
    }
  }

  // Components: the first render, then the action a user would press.
  const configComponent = (manifest.configurations?.[target === 'organization' ? 'account' : target]?.componentId ??
    manifest.configurations?.account?.componentId) as string | undefined;
  for (const componentId of exports.components) {
    const isConfig = componentId === configComponent;
    const ctx = isConfig
      ? {
          type: `configuration_${target === 'organization' ? 'account' : target}`,
          spaceId: 'space_catalogue',
          siteId: 'site_catalogue',
          organizationId: 'org_catalogue',
          theme: 'light',
        }
      : context;
    const props =
      plan.props?.[componentId] ??
      (isConfig
        ? {
            installation: { configuration: inst.configuration },
            ...(target === 'space' ? { spaceInstallation: { configuration: inst.configuration } } : {}),
            ...(target === 'site' ? { siteInstallation: { configuration: inst.configuration } } : {}),
          }
        : {});
    const unfurl = plan.unfurl?.[componentId];
    const body = unfurl ? { componentId, props, context: ctx, action: { action: '@link.unfurl', url: unfurl } } : { componentId, props, context: ctx };
    tried.push(unfurl ? `unfurl ${componentId}` : `render ${componentId}`);
    const r = await api('POST', `/api/v1/installations/${inst.id}/render`, body);
    steps.push(judge(unfurl ? `@link.unfurl of ${componentId}` : `render ${componentId}`, r.status, r.body, await invocation(r.headers.get('x-request-id'))));
    if (r.status !== 200 || !r.body?.element) continue;
    const planned = plan.actions?.[componentId];
    const action = planned?.action ?? ownActions(r.body.element)[0];
    if (!action) continue;
    const state = planned?.state ? { ...r.body.state, ...JSON.parse(JSON.stringify(planned.state).replaceAll('$receiver', receiver.url)) } : r.body.state;
    tried.push(`${componentId} action ${action.action}`);
    const pressed = await api('POST', `/api/v1/installations/${inst.id}/render`, { componentId, props: r.body.props, state, context: ctx, action });
    steps.push(judge(`action ${action.action} of ${componentId}`, pressed.status, pressed.body, await invocation(pressed.headers.get('x-request-id'))));
  }

  // Public endpoints: the requests the plan knows, else the installation endpoint's root.
  const requests = plan.requests ?? (exports.fetch ? [{ method: 'GET', path: '/', what: 'GET on the installation endpoint' } as Request_] : []);
  for (const q of requests) {
    const url = `${q.on === 'integration' ? integrationEndpoint : endpoint}${q.path === '/' ? '' : q.path}`;
    const headers: Record<string, string> = { ...(q.headers ?? {}) };
    const env = existsSync(join(dir, '.env')) ? readFileSync(join(dir, '.env'), 'utf8') : '';
    if (q.slackSigned) {
      const ts = String(Math.floor(Date.now() / 1000));
      const secret = env.match(/SIGNING_SECRET=(.*)/)?.[1] ?? '';
      headers['x-slack-request-timestamp'] = ts;
      headers['x-slack-signature'] = `v0=${createHmac('sha256', secret)
        .update(`v0:${ts}:${q.body ?? ''}`)
        .digest('hex')}`;
    }
    if (q.githubSigned) {
      const secret = env.match(/WEBHOOK_SECRET=(.*)/)?.[1] ?? '';
      headers['x-hub-signature-256'] = `sha256=${createHmac('sha256', secret)
        .update(q.body ?? '')
        .digest('hex')}`;
    }
    tried.push(`${q.method ?? 'GET'} ${q.on ?? 'installation'} endpoint ${q.path}`);
    const res = await fetch(url, { method: q.method ?? 'GET', headers, body: q.body, redirect: 'manual' });
    const text = await res.text();
    // Work the handler left to waitUntil prints after the answer: give it a moment.
    await new Promise((r) => setTimeout(r, 1500));
    steps.push(judge(q.what, res.status, text, await invocation(res.headers.get('x-request-id')), false));
  }

  // Events it subscribes to, sent as a user would.
  const before = receiver.received.length;
  for (const type of exports.events) {
    tried.push(`event ${type}`);
    steps.push(await sendEvent(type, inst));
  }
  if (plan.expectsDelivery) {
    tried.push('its delivery to a receiver');
    for (let i = 0; i < 100 && receiver.received.length === before; i++) await new Promise((r) => setTimeout(r, 100));
    const got = receiver.received.slice(before);
    steps.push(
      got.length
        ? { what: 'delivery sent by the integration', outcome: 'ran', detail: `${got.length} request(s) at the receiver, e.g. ${got[0]}` }
        : { what: 'delivery sent by the integration', outcome: 'failed', detail: 'nothing reached the receiver within 10 s' },
    );
  }
  if (plan.stoppedBy && tried.some((t) => t.startsWith('stand-in')))
    for (const st of steps.slice(steps.findIndex((x) => x.what.startsWith('OAuth callback')) + 1))
      if (st.outcome === 'failed') Object.assign(st, { outcome: 'stopped at a third party', detail: `${st.detail}; ${plan.stoppedBy}` });
  return { mainPath: tried.join(', '), steps };
}

async function oauthRoundTrip(start: string): Promise<Step[]> {
  const steps: Step[] = [];
  const first = await fetch(start, { redirect: 'manual' });
  const location = first.headers.get('location');
  const inv = await invocation(first.headers.get('x-request-id'));
  if (first.status !== 302 || !location) {
    steps.push(judge('OAuth start', first.status, await first.text(), inv));
    return steps;
  }
  const authorize = new URL(location);
  const redirectUri = authorize.searchParams.get('redirect_uri');
  const state = authorize.searchParams.get('state');
  steps.push({
    what: 'OAuth start',
    outcome: 'ran',
    detail: `302 to ${authorize.origin}${authorize.pathname} (client_id, redirect_uri, state${authorize.searchParams.has('scope') ? ', scope' : ''})`,
  });
  if (!redirectUri || !state) {
    steps.push({ what: 'OAuth authorize URL', outcome: 'failed', detail: `no ${redirectUri ? 'state' : 'redirect_uri'} in ${location}` });
    return steps;
  }
  // The provider's answer: the browser comes back to redirect_uri with a code and the state.
  const back = new URL(redirectUri);
  back.searchParams.set('code', 'catalogue-code');
  back.searchParams.set('state', state);
  const callback = await fetch(back, { redirect: 'manual' });
  const text = await callback.text();
  const step = judge('OAuth callback (code exchange)', callback.status, text, await invocation(callback.headers.get('x-request-id')));
  if (step.outcome === 'failed' && /token exchange[^<]*could not reach ([^ :]+)/.test(text)) {
    step.outcome = 'stopped at a third party';
    step.detail = `the token exchange could not reach ${text.match(/could not reach (\S+?):/)?.[1]}`;
  }
  steps.push(step);
  return steps;
}

async function sendEvent(type: string, inst: any): Promise<Step> {
  const sets = [];
  if (inst.space) sets.push('--set', `spaceId=${inst.space}`);
  if (inst.site) sets.push('--set', `siteId=${inst.site}`);
  const sent = await cli(['events', 'send', type, ...sets, '--json']);
  let eventId: string | undefined;
  try {
    eventId = JSON.parse(sent.stdout).eventId;
  } catch {
    /* below */
  }
  if (sent.code !== 0 && /is not a platform event type/.test(sent.stderr))
    return {
      what: `event ${type}`,
      outcome: 'not run here',
      detail: "Switchyard does not emit this GitBook event (an uninstall ends an installation's code for good)",
    };
  if (sent.code !== 0 || !eventId) return { what: `event ${type}`, outcome: 'failed', detail: firstLine(sent.stderr || sent.stdout) };
  for (let i = 0; i < 300; i++) {
    const e = await api('GET', `/api/v1/events/${eventId}`);
    const run = (e.body?.handlerRuns ?? []).find((r: any) => r.installationId === inst.id);
    if (!run && i > 50) return { what: `event ${type}`, outcome: 'failed', detail: 'no handler run was queued for the installation' };
    if (run?.lastInvocation && !run.running) {
      const inv = await invocation(run.lastInvocation);
      return judge(`event ${type}`, inv?.status ?? 0, run.lastError ?? '', inv);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { what: `event ${type}`, outcome: 'failed', detail: 'the handler did not finish within 30 s' };
}

// ---------------------------------------------------------------------------------------------

function overall(steps: Step[]): { outcome: Row['outcome']; reason: string } {
  // What does not run here (a GitBook-only event) says nothing about the path that did.
  const order: Outcome[] = steps.some((x) => x.outcome !== 'not run here')
    ? ['failed', 'needs GitBook content', 'stopped at a third party', 'ran']
    : ['not run here'];
  for (const o of order) {
    const s = steps.find((x) => x.outcome === o);
    if (s) return { outcome: o, reason: o === 'ran' ? '' : `${s.what}: ${s.detail}` };
  }
  return { outcome: 'not run here', reason: 'nothing to run' };
}

async function main(): Promise<void> {
  mkdirSync(work, { recursive: true });
  // check reads config.yaml from the folder it runs in: the same limits as the server below.
  writeFileSync(join(work, 'config.yaml'), 'integrations_dir: ./integrations\ndata_dir: ./data-check\nsandbox:\n  cpu_time: 5s\n  startup_time: 15s\n');
  const names = prepare();
  const rows: Row[] = [];
  const checked = new Map<string, Exports>();
  for (const name of names) {
    const r = await cli(['check', join(work, 'integrations', name), '--json']);
    let j: any;
    try {
      j = JSON.parse(r.stdout);
    } catch {
      j = { ok: false, errors: [{ message: firstLine(r.stderr) || 'check printed no JSON' }] };
    }
    say(`check ${name}: ${j.ok ? 'pass' : 'fail'}`);
    const row: Row = {
      name,
      check: j.ok ? 'pass' : 'fail',
      checkErrors: (j.errors ?? []).map((e: any) => e.message),
      mainPath: '',
      outcome: 'not run: check failed',
      reason: '',
      steps: [],
    };
    if (!j.ok) row.reason = row.checkErrors[0] ?? '';
    else checked.set(name, { ...(j.sandbox.exports as Exports), unsupported: j.sandbox.exports.unsupported ?? [] });
    rows.push(row);
  }

  const stopReceiver = await startReceiver();
  const stop = await serve();
  try {
    for (const row of rows) {
      const exports = checked.get(row.name);
      if (!exports) continue;
      const runnable = exports.fetch || exports.components.length > 0 || exports.events.length > 0;
      if (!runnable) {
        row.outcome = 'not run here';
        row.mainPath = exports.unsupported.map((u) => u.handler).join(', ');
        row.reason = exports.unsupported.map((u) => `${u.handler}: ${u.reason}`).join('; ');
        continue;
      }
      say(`main path ${row.name}`);
      try {
        const r = await runMainPath(row.name, join(work, 'integrations', row.name), exports);
        row.mainPath = r.mainPath;
        row.steps = r.steps;
        Object.assign(row, overall(r.steps));
        if (exports.unsupported.length)
          row.steps.push({
            what: exports.unsupported.map((u) => u.handler).join(', '),
            outcome: 'not run here',
            detail: exports.unsupported.map((u) => u.reason).join('; '),
          });
      } catch (e) {
        row.outcome = 'failed';
        row.reason = `the script itself failed: ${(e as Error).message}`;
      }
    }
  } finally {
    stop();
    stopReceiver();
  }
  report(rows);
}

function report(rows: Row[]): void {
  if (asJson) {
    process.stdout.write(`${JSON.stringify(rows, null, 2)}\n`);
    return;
  }
  for (const r of rows) {
    process.stdout.write(`\n${r.name}: check ${r.check}; ${r.outcome}${r.reason ? ` (${r.reason})` : ''}\n`);
    if (r.mainPath) process.stdout.write(`  main path: ${r.mainPath}\n`);
    for (const s of r.steps) process.stdout.write(`    ${s.outcome.padEnd(24)} ${s.what}: ${s.detail}\n`);
  }
  const count = (f: (r: Row) => boolean) => rows.filter(f).length;
  const allowed = rows.filter((r) => r.check === 'pass' && r.outcome !== 'not run here');
  process.stdout.write(
    [
      '',
      `integrations: ${rows.length}`,
      `pass check: ${count((r) => r.check === 'pass')}`,
      `handlers the spec allows: ${allowed.length} (the others only inject scripts into published sites)`,
      `main path ran through Switchyard: ${count((r) => r.outcome === 'ran' || r.outcome === 'stopped at a third party')} (ran to the end: ${count((r) => r.outcome === 'ran')}; stopped at an unreachable third party: ${count((r) => r.outcome === 'stopped at a third party')})`,
      `needs GitBook's content API (gitbook.api_url): ${count((r) => r.outcome === 'needs GitBook content')}`,
      `failed: ${count((r) => r.outcome === 'failed')}${rows
        .filter((r) => r.outcome === 'failed')
        .map((r) => `\n  ${r.name}: ${r.reason}`)
        .join('')}`,
      '',
    ].join('\n'),
  );
}

await main();
