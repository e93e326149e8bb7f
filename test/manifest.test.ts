/**
 * platform-manifest.yaml (spec 2.5, 2.6, 8): valid manifests, secrets from the environment, the
 * files a manifest names, warnings, and an installation's configuration checked against it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { deflateSync } from 'node:zlib';
import {
  coerceConfigurationValue,
  loadManifest,
  missingRequired,
  parseManifest,
  pngSize,
  validateConfiguration,
  type ConfigurationsDef,
} from '../src/manifest/index.ts';
import { ROOT, tmpDir } from './helpers/index.ts';

/** A real PNG of w x h (one colour), for asset checks. */
function png(w: number, h: number): Buffer {
  const table = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (b: Buffer) => {
    let c = 0xffffffff;
    for (const x of b) c = table[(c ^ x) & 0xff] ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type: string, data: Buffer) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const td = Buffer.concat([Buffer.from(type, 'latin1'), data]);
    const c = Buffer.alloc(4);
    c.writeUInt32BE(crc(td));
    return Buffer.concat([len, td, c]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr[8] = 8;
  ihdr[9] = 2;
  const raw = Buffer.alloc((w * 3 + 1) * h, 0x80);
  for (let y = 0; y < h; y++) raw[y * (w * 3 + 1)] = 0;
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(raw)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

const FULL = `name: full-example
title: Full example
description: Uses every manifest key.
summary: |
  # Hello
  Some **markdown**.
organization: acme
visibility: unlisted
scopes:
  - space:content:read
  - site:views:read
  - openapi:write
  - conversations:ingest
script: src/index.ts
blocks:
  - id: counter
    title: Counter
    description: Counts presses
  - id: other
    title: Other
categories: [analytics, authenticated-access]
externalLinks:
  - label: Docs
    url: https://example.com/docs
configurations:
  account:
    properties:
      webhook_url:
        type: string
        title: Webhook URL
        description: URL that receives the signed POSTs
      mode:
        type: string
        title: Mode
        description: How fast
        enum: [fast, slow]
        default: fast
      channel:
        type: string
        title: Channel
        description: Where to post
        completion_url: /channels
      limit:
        type: number
        title: Limit
        description: How many
        default: 3
      enabled:
        type: boolean
        title: Enabled
        description: On or off
        default: false
      oauth_credentials:
        type: button
        title: Connection
        description: Connect your account
        button_text: Connect
        callback_url: /oauth
    required: [webhook_url, oauth_credentials]
  site:
    properties:
      tracking:
        type: boolean
        title: Tracking
        description: Count views
secrets:
  CLIENT_ID: \${{ env.FULL_CLIENT_ID }}
  CLIENT_SECRET: "prefix-\${{ env.FULL_CLIENT_SECRET }}"
`;

test('a manifest using every key is valid and typed', () => {
  const r = parseManifest(FULL, 'm.yaml', { FULL_CLIENT_ID: 'id-1', FULL_CLIENT_SECRET: 's3' });
  assert.deepEqual(r.problems, []);
  const m = r.manifest!;
  assert.equal(m.name, 'full-example');
  assert.equal(m.visibility, 'unlisted');
  assert.deepEqual(m.scopes, ['space:content:read', 'site:views:read', 'openapi:write', 'conversations:ingest']);
  assert.equal(m.configurations?.account?.properties?.mode.type, 'string');
  const button = m.configurations!.account!.properties!.oauth_credentials;
  assert.equal(button.type === 'button' && button.callback_url, '/oauth');
  // Secrets are resolved apart; the manifest keeps the references.
  assert.deepEqual(r.secrets, { CLIENT_ID: 'id-1', CLIENT_SECRET: 'prefix-s3' });
  assert.equal(m.secrets?.CLIENT_ID, '${{ env.FULL_CLIENT_ID }}');
});

test('the minimal manifest: the six required keys, an empty scope list allowed', () => {
  const r = parseManifest('name: a\ntitle: A\ndescription: d\norganization: o\nvisibility: public\nscopes: []\n', 'm.yaml', {});
  assert.deepEqual(r.problems, []);
  assert.deepEqual(r.manifest?.scopes, []);
});

test('every problem is listed at once, in file order, each with file:line:col', () => {
  const text = [
    'name: Bad Name',
    'title: ""',
    'description: d',
    'organization: o',
    'visibility: hidden',
    'scopes:',
    '  - site:script:inject',
    '  - nope',
    '',
  ].join('\n');
  const r = parseManifest(text, 'x/platform-manifest.yaml', {});
  assert.equal(r.manifest, undefined);
  assert.deepEqual(
    r.problems.map((p) => p.where),
    [
      'x/platform-manifest.yaml:1:7',
      'x/platform-manifest.yaml:2:8',
      'x/platform-manifest.yaml:5:13',
      'x/platform-manifest.yaml:7:5',
      'x/platform-manifest.yaml:8:5',
    ],
  );
  assert.ok(r.problems.every((p) => p.severity === 'error'));
});

test('names: the spec\'s "string", in the characters a URL keeps; GitBook\'s form is a warning citing its validator', () => {
  const load = (name: string) =>
    parseManifest(`name: "${name}"\ntitle: A\ndescription: d\norganization: o\nvisibility: public\nscopes: []\n`, 'x/platform-manifest.yaml', {});
  for (const name of ['my-integration', 'MyIntegration', 'VA-Auth0']) assert.deepEqual(load(name).problems, [], name);
  for (const name of ['my_integration', 'my--thing', 'v1.2', '-edge-']) {
    const r = load(name);
    assert.equal(r.manifest?.name, name);
    assert.equal(r.problems.length, 1, name);
    assert.equal(r.problems[0].severity, 'warning');
    assert.equal(r.problems[0].where, 'x/platform-manifest.yaml:1:7');
    assert.match(r.problems[0].message, /is not a name GitBook's manifest validator accepts/);
  }
  // What would not survive in the integration's URLs stays an error, alone.
  for (const name of ['my integration', 'a/b', '..', '.', 'ünï', 'a%2Fb', 'a?b', '']) {
    const r = load(name);
    assert.equal(r.manifest, undefined, name);
    assert.ok(
      r.problems.every((p) => p.severity === 'error'),
      name,
    );
  }
});

test('a missing environment variable names the variable and the secret; others still resolve', () => {
  const r = parseManifest(FULL, 'm.yaml', { FULL_CLIENT_ID: 'id-1' });
  assert.equal(r.manifest, undefined);
  assert.equal(r.problems.length, 1);
  assert.match(r.problems[0].message, /FULL_CLIENT_SECRET is not set \(secret CLIENT_SECRET reads it\)/);
  assert.equal(r.problems[0].where, 'm.yaml:68:18');
  assert.deepEqual(r.secrets, {}, 'no secrets are handed out for a manifest that failed');
});

test('the summary limit (2048) is checked here, not late', () => {
  const base = 'name: a\ntitle: A\ndescription: d\norganization: o\nvisibility: public\nscopes: []\n';
  assert.deepEqual(parseManifest(`${base}summary: ${'x'.repeat(2048)}\n`, 'm.yaml', {}).problems, []);
  assert.match(parseManifest(`${base}summary: ${'x'.repeat(2049)}\n`, 'm.yaml', {}).problems[0].message, /at most 2048/);
});

test("property titles past 50 and descriptions past 100 characters load, with a warning citing GitBook's validator", () => {
  const make = (title: string, description: string) =>
    `name: a\ntitle: A\ndescription: d\norganization: o\nvisibility: public\nscopes: []\nconfigurations:\n  site:\n    properties:\n      p:\n        type: string\n        title: ${title}\n        description: ${description}\n`;
  assert.deepEqual(parseManifest(make('t'.repeat(50), 'd'.repeat(100)), 'm.yaml', {}).problems, []);
  const r = parseManifest(make('t'.repeat(51), 'd'.repeat(101)), 'm.yaml', {});
  assert.equal(r.manifest?.configurations?.site?.properties?.p.title, 't'.repeat(51));
  assert.deepEqual(
    r.problems.map((p) => [p.severity, p.where, p.message]),
    [
      [
        'warning',
        'm.yaml:12:16',
        "configurations.site.properties.p.title: is 51 characters; GitBook's manifest validator allows at most 50 in a property title (@gitbook/api's INTEGRATION_PROPERTY_TITLE_MAX_LENGTH)",
      ],
      [
        'warning',
        'm.yaml:13:22',
        "configurations.site.properties.p.description: is 101 characters; GitBook's manifest validator allows at most 100 in a property description",
      ],
    ],
  );
});

test('a 60-character property title in a folder loads with a warning at platform-manifest.yaml:line:col; a long button text is fine', (t) => {
  const title = 'A title of sixty characters, past what GitBook allows: 60 c.';
  assert.equal(title.length, 60);
  const dir = folder(
    t,
    `configurations:\n  account:\n    properties:\n      connect:\n        type: button\n        title: "${title}"\n        description: Connect\n        button_text: ${'Connect your account at the provider and come back here'}\n        callback_url: /oauth\n`,
  );
  const r = loadManifest(dir, {}, { label: 'x' });
  assert.ok(r.manifest, JSON.stringify(r.problems));
  assert.deepEqual(
    r.problems.map((p) => [p.severity, p.where]),
    [['warning', 'x/platform-manifest.yaml:12:16']],
  );
  assert.match(r.problems[0].message, /title: is 60 characters; GitBook's manifest validator allows at most 50/);
});

test('warnings do not fail: a secret written in plain text, an env reference outside secrets', () => {
  const text = 'name: a\ntitle: "${{ env.TITLE }}"\ndescription: d\norganization: o\nvisibility: public\nscopes: []\nsecrets:\n  KEY: literal-value\n';
  const r = parseManifest(text, 'm.yaml', {});
  assert.ok(r.manifest);
  assert.equal(r.problems.length, 2);
  assert.ok(r.problems.every((p) => p.severity === 'warning'));
  assert.match(r.problems[0].message, /only replaced under secrets/);
  assert.match(r.problems[1].message, /secret KEY is written in the manifest itself/);
  assert.deepEqual(r.secrets, { KEY: 'literal-value' });
});

test('a problem never carries a secret value', () => {
  const text = 'name: a\ntitle: A\ndescription: d\norganization: o\nvisibility: nope\nscopes: []\nsecrets:\n  KEY: ${{ env.K }}\n';
  const r = parseManifest(text, 'm.yaml', { K: 'super-secret-value' });
  assert.ok(r.problems.length > 0);
  assert.ok(!JSON.stringify(r).includes('super-secret-value'));
});

test('the shipped integrations are valid (oauth-example once its variables are set)', () => {
  const env = { OAUTH_EXAMPLE_CLIENT_ID: 'id', OAUTH_EXAMPLE_CLIENT_SECRET: 'secret', OAUTH_EXAMPLE_PROVIDER_URL: 'https://p.example' };
  for (const name of ['webhook', 'hello-components', 'oauth-example']) {
    const r = loadManifest(join(ROOT, 'integrations', name), env);
    assert.deepEqual(r.problems, [], name);
    assert.equal(r.manifest?.name, name);
  }
  const webhook = loadManifest(join(ROOT, 'integrations/webhook'), {}).manifest!;
  assert.equal(webhook.script, undefined);
  assert.deepEqual(webhook.configurations?.account?.required, ['webhook_url', 'event_types']);
  assert.deepEqual(webhook.scopes, ['space:content:read', 'site:views:read']);
  const oauth = loadManifest(join(ROOT, 'integrations/oauth-example'), {});
  assert.equal(oauth.manifest, undefined);
  assert.match(oauth.problems[0].message, /OAUTH_EXAMPLE_CLIENT_ID is not set \(secret CLIENT_ID reads it\)/);
});

function folder(t: Parameters<typeof tmpDir>[0], manifestExtra: string, files: Record<string, string | Buffer> = {}): string {
  const dir = tmpDir(t);
  for (const [f, content] of Object.entries(files)) {
    mkdirSync(join(dir, f, '..'), { recursive: true });
    writeFileSync(join(dir, f), content);
  }
  writeFileSync(join(dir, 'platform-manifest.yaml'), `name: a\ntitle: A\ndescription: d\norganization: o\nvisibility: public\nscopes: []\n${manifestExtra}`);
  return dir;
}

test('script, icon and preview images must exist inside the folder; images must be PNG', (t) => {
  const outside = tmpDir(t);
  writeFileSync(join(outside, 'secret.ts'), 'export {}');
  const dir = folder(t, 'script: ../escape.ts\nicon: assets/icon.jpg\npreviewImages:\n  - assets/missing.png\n  - /etc/passwd\n  - assets/link.png\n', {
    'assets/icon.jpg': 'not a png',
  });
  symlinkSync(join(outside, 'secret.ts'), join(dir, 'assets/link.png'));
  const r = loadManifest(dir, {}, { label: 'x' });
  assert.equal(r.manifest, undefined);
  const byLine = r.problems.map((p) => `${p.where.split(':')[1]} ${p.message}`);
  assert.deepEqual(byLine, [
    '7 script: "../escape.ts" points outside the integration folder',
    '8 icon: "assets/icon.jpg" is not a PNG, JPEG or SVG image',
    '10 previewImages[0]: preview image file "assets/missing.png" does not exist',
    '11 previewImages[1]: "/etc/passwd" is an absolute path',
    '12 previewImages[2]: "assets/link.png" is a link to a file outside the integration folder',
  ]);
  assert.ok(r.problems.every((p) => p.where.startsWith('x/platform-manifest.yaml:')));
});

test('a preview that is not 2:1 is a warning; 1600 x 800 is fine', (t) => {
  const dir = folder(t, 'icon: icon.png\npreviewImages: [wide.png, square.png]\nscript: src/index.ts\n', {
    'icon.png': png(64, 64),
    'wide.png': png(1600, 800),
    'square.png': png(300, 300),
    'src/index.ts': 'export default 1;\n',
  });
  assert.deepEqual(pngSize(join(dir, 'wide.png')), { width: 1600, height: 800 });
  const r = loadManifest(dir, {});
  assert.ok(r.manifest);
  assert.equal(r.scriptFile, join(dir, 'src/index.ts'));
  assert.equal(r.problems.length, 1);
  assert.equal(r.problems[0].severity, 'warning');
  assert.match(r.problems[0].message, /previewImages\[1\]: "square.png" is 300 x 300, not 2:1/);
});

test('an SVG icon is accepted (spec 2.5: a local asset path), with a warning that GitBook publishes PNG only; an SVG preview is not', (t) => {
  const svg = '<?xml version="1.0"?>\n<!-- drawn by hand -->\n<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 8 8"><rect width="8" height="8"/></svg>\n';
  const dir = folder(t, 'icon: assets/icon.svg\npreviewImages: [assets/icon.svg]\n', { 'assets/icon.svg': svg, 'notes.svg': '<html><svg></svg></html>' });
  const r = loadManifest(dir, {}, { label: 'x' });
  assert.deepEqual(
    r.problems.map((p) => `${p.severity} ${p.where} ${p.message}`),
    [
      'warning x/platform-manifest.yaml:7:7 icon: "assets/icon.svg" is an SVG image; GitBook\'s CLI publishes PNG icons only',
      'error x/platform-manifest.yaml:8:17 previewImages[0]: "assets/icon.svg" is not a PNG or JPEG image',
    ],
  );
  const ok = loadManifest(folder(t, 'icon: assets/icon.svg\n', { 'assets/icon.svg': svg }), {});
  assert.equal(ok.manifest?.icon, 'assets/icon.svg');
  // A file that only mentions svg somewhere is no SVG image.
  const html = loadManifest(folder(t, 'icon: notes.svg\n', { 'notes.svg': '<html><svg></svg></html>' }), {});
  assert.equal(html.manifest, undefined);
  assert.match(html.problems[0].message, /is not a PNG, JPEG or SVG image/);
});

test('a script with an extension the bundler does not read is refused', (t) => {
  const dir = folder(t, 'script: main.py\n', { 'main.py': 'print(1)' });
  assert.match(loadManifest(dir, {}).problems[0].message, /"main.py" is not a script the bundler reads/);
});

test('no manifest: the folder is named and `switchyard new` suggested; .yml gets a rename hint', (t) => {
  const dir = tmpDir(t);
  const r = loadManifest(dir, {}, { label: 'integrations/x' });
  assert.match(r.problems[0].message, /integrations\/x has no platform-manifest.yaml/);
  assert.match(r.problems[0].hint!, /switchyard new/);
  writeFileSync(join(dir, 'platform-manifest.yml'), 'name: x\n');
  assert.match(loadManifest(dir, {}).problems[0].hint!, /rename platform-manifest.yml/);
});

test('a .env in the folder supplies secrets; the real environment wins', (t) => {
  const dir = folder(t, 'secrets:\n  A: ${{ env.VAR_A }}\n  B: ${{ env.VAR_B }}\n', { '.env': 'VAR_A=from-file\nVAR_B=from-file\n' });
  const r = loadManifest(dir, { VAR_B: 'from-env' });
  assert.deepEqual(r.secrets, { A: 'from-file', B: 'from-env' });
});

const def: ConfigurationsDef = {
  properties: {
    webhook_url: { type: 'string', title: 'Webhook URL', description: 'URL that receives the signed POSTs' },
    mode: { type: 'string', title: 'Mode', description: 'How fast', enum: ['fast', 'slow'] },
    limit: { type: 'number', title: 'Limit', description: 'How many' },
    enabled: { type: 'boolean', title: 'Enabled', description: 'On or off' },
    connection: { type: 'button', title: 'Connection', description: 'Connect', button_text: 'Connect', callback_url: '/oauth' },
  },
  required: ['webhook_url', 'connection'],
};

test('configuration: values of the right types pass', () => {
  const c = { webhook_url: 'https://x', mode: 'slow', limit: 3, enabled: true, connection: { access_token: 't' } };
  assert.deepEqual(validateConfiguration(def, c), []);
  assert.deepEqual(missingRequired(def, c), []);
});

test('configuration: every problem with its field path', () => {
  const problems = validateConfiguration(def, { webhook_url: 5, mode: 'fastt', limit: '3', enabled: 'yes', extra: 1, connection: 'x' });
  const byWhere = Object.fromEntries(problems.map((p) => [p.where, p]));
  assert.match(byWhere['configuration.webhook_url'].message, /must be a string, got number 5/);
  assert.match(byWhere['configuration.mode'].message, /"fastt" is not one of the allowed values/);
  assert.equal(byWhere['configuration.mode'].hint, 'did you mean "fast"?');
  assert.match(byWhere['configuration.limit'].message, /must be a number/);
  assert.match(byWhere['configuration.enabled'].message, /must be true or false/);
  assert.match(byWhere['configuration.extra'].message, /"extra" is not a property of this integration/);
  assert.match(byWhere['configuration.connection'].message, /set by the "Connect" button's callback/);
  assert.equal(problems.length, 6);
});

test('configuration: required keys are missing until set; partial allows them (pending)', () => {
  assert.deepEqual(missingRequired(def, {}), ['webhook_url', 'connection']);
  assert.deepEqual(missingRequired(def, { webhook_url: '' }), ['webhook_url', 'connection']);
  assert.deepEqual(validateConfiguration(def, { mode: 'fast' }, { partial: true }), []);
  const full = validateConfiguration(def, { mode: 'fast' });
  assert.deepEqual(
    full.map((p) => p.where),
    ['configuration.webhook_url', 'configuration.connection'],
  );
  assert.match(full[1].hint!, /press "Connect"/);
});

test('configuration: oauth_credentials is always accepted (the OAuth handler writes it); no definition means no properties', () => {
  assert.deepEqual(validateConfiguration(def, { webhook_url: 'u', connection: {}, oauth_credentials: { access_token: 'x' } }), []);
  assert.deepEqual(validateConfiguration(undefined, {}), []);
  assert.match(validateConfiguration(undefined, { a: 1 })[0].hint!, /no configuration properties/);
  assert.match(validateConfiguration(def, [1, 2])[0].message, /must be a map/);
});

test('configuration: CLI text is turned into the property type', () => {
  assert.equal(coerceConfigurationValue(def, 'limit', '42'), 42);
  assert.equal(coerceConfigurationValue(def, 'limit', 'many'), 'many');
  assert.equal(coerceConfigurationValue(def, 'enabled', 'false'), false);
  assert.deepEqual(coerceConfigurationValue(def, 'connection', '{"access_token":"t"}'), { access_token: 't' });
  assert.equal(coerceConfigurationValue(def, 'webhook_url', '42'), '42');
});

test('configuration: keys named like Object.prototype members are unknown properties, not crashes', () => {
  const problems = validateConfiguration(def, { toString: 0, constructor: 'x', hasOwnProperty: true });
  assert.deepEqual(
    problems.map((p) => p.where),
    ['configuration.toString', 'configuration.constructor', 'configuration.hasOwnProperty', 'configuration.webhook_url', 'configuration.connection'],
  );
  assert.equal(coerceConfigurationValue(def, 'toString', '1'), '1');
});

test('property and secret names cannot be __proto__, constructor or prototype', () => {
  const text =
    'name: a\ntitle: A\ndescription: d\norganization: o\nvisibility: public\nscopes: []\nconfigurations:\n  site:\n    properties:\n      constructor:\n        type: string\n        title: T\n        description: D\nsecrets:\n  prototype: x\n';
  const r = parseManifest(text, 'm.yaml', {});
  assert.deepEqual(
    r.problems.filter((p) => p.severity === 'error').map((p) => p.where),
    ['m.yaml:10:7', 'm.yaml:15:3'],
  );
});

test('__proto__ is an unknown key wherever a manifest has keys, and a secret never reads a member every object has', () => {
  const base = 'name: a\ntitle: A\ndescription: d\norganization: o\nvisibility: public\nscopes: []\n';
  for (const [extra, where, message] of [
    ['__proto__:\n  x: 1\n', 'm.yaml:7:1', '__proto__: unknown key "__proto__"'],
    ['configurations:\n  account:\n    __proto__: 1\n    properties: {}\n', 'm.yaml:9:5', 'configurations.account.__proto__: unknown key "__proto__"'],
    ['blocks:\n  - id: b\n    title: B\n    __proto__: {}\n', 'm.yaml:10:5', 'blocks[0].__proto__: unknown key "__proto__"'],
    ['secrets:\n  TOKEN: "${{ env.toString }}"\n', 'm.yaml:8:10', 'secrets.TOKEN: environment variable toString is not set (secret TOKEN reads it)'],
  ] as const) {
    const r = parseManifest(base + extra, 'm.yaml', {});
    assert.equal(r.manifest, undefined, extra);
    assert.deepEqual(
      r.problems.filter((p) => p.severity === 'error').map((p) => [p.where, p.message]),
      [[where, message]],
      extra,
    );
  }
});

test('a recursive alias or an alias bomb in a manifest is a problem with its position, not a crash', () => {
  const base = 'name: a\ndescription: d\norganization: o\nvisibility: public\nscopes: []\n';
  const recursive = parseManifest(`${base}title: &t [*t]\n`, 'm.yaml', {});
  assert.equal(recursive.manifest, undefined);
  assert.match(recursive.problems[0].message, /title\[0\]: an alias refers to a node that contains it/);
  assert.equal(recursive.problems[0].where, 'm.yaml:6:12');
  let bomb = `${base}title: A\nx0: &x0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n`;
  for (let i = 1; i < 9; i++)
    bomb += `x${i}: &x${i} [${Array(10)
      .fill(`*x${i - 1}`)
      .join(',')}]\n`;
  const r = parseManifest(bomb, 'm.yaml', {});
  assert.equal(r.manifest, undefined);
  assert.match(r.problems[0].message, /too many aliases/);
});
