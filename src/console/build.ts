/**
 * Build the console's browser bundle from src/console/web/ with esbuild: one minified JS file (the
 * app and Preact) and one CSS file, nothing fetched from elsewhere at run time.
 *
 * This file reads its sources beside itself, so it is loaded only where those exist (a checkout);
 * the single executable carries the result instead (see assets.ts, CONSOLE_ASSETS_DEFINE).
 */
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import type { ConsoleAssets } from './assets.ts';

export const WEB_DIR = join(import.meta.dirname, 'web');

export async function buildConsoleAssets(): Promise<ConsoleAssets> {
  const esbuild = await import('esbuild');
  const started = performance.now();
  const out = await esbuild.build({
    entryPoints: { app: join(WEB_DIR, 'main.tsx') },
    bundle: true,
    write: false,
    outdir: '/console-out',
    format: 'iife',
    platform: 'browser',
    target: ['es2022', 'chrome110', 'firefox110', 'safari16'],
    jsx: 'automatic',
    jsxImportSource: 'preact',
    minify: true,
    legalComments: 'none',
    absWorkingDir: join(WEB_DIR, '..', '..', '..'),
    logLevel: 'silent',
  });
  const js = out.outputFiles.find((f) => f.path.endsWith('.js'))?.text ?? '';
  const css = out.outputFiles.find((f) => f.path.endsWith('.css'))?.text ?? '';
  const hash = createHash('sha256').update(js).update('\0').update(css).digest('hex').slice(0, 12);
  return {
    hash,
    js,
    css,
    sizes: {
      js: Buffer.byteLength(js),
      css: Buffer.byteLength(css),
      jsGzip: gzipSync(js).byteLength,
      cssGzip: gzipSync(css).byteLength,
    },
    buildMs: Math.round(performance.now() - started),
  };
}
