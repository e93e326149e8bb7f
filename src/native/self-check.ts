/**
 * `switchyard --self-check` (executable only): prints, as JSON, what the executable runs on and
 * proves each embedded part works: SQLite opens a database, an isolate evaluates code, esbuild
 * bundles a TypeScript module. Exit code 0 when every check passes, 1 otherwise. Support asks for
 * this output; the smoke test reads `execArgv` from it to see `--no-node-snapshot` in force.
 */
import { VERSION } from '../version.ts';
import { isExecutable, prepareNativeFiles } from './index.ts';

type Check = { ok: true; detail: string } | { ok: false; error: string };

export interface SelfCheckReport {
  version: string;
  node: string;
  executable: boolean;
  execArgv: string[];
  /** The cache folder holding the unpacked native files. */
  nativeDir: string | null;
  checks: Record<'sqlite' | 'isolate' | 'esbuild', Check>;
}

async function attempt(fn: () => Promise<string> | string): Promise<Check> {
  try {
    return { ok: true, detail: await fn() };
  } catch (e) {
    return { ok: false, error: (e as Error)?.message ?? String(e) };
  }
}

export async function selfCheck(write: (s: string) => void = (s) => process.stdout.write(s)): Promise<number> {
  const report: SelfCheckReport = {
    version: VERSION,
    node: process.version,
    executable: isExecutable(),
    execArgv: process.execArgv,
    nativeDir: isExecutable() ? prepareNativeFiles().dir : null,
    checks: {
      sqlite: await attempt(async () => {
        const { default: Database } = await import('better-sqlite3');
        const db = new Database(':memory:');
        try {
          const row = db.prepare('SELECT sqlite_version() AS v').get() as { v: string };
          return `SQLite ${row.v}`;
        } finally {
          db.close();
        }
      }),
      isolate: await attempt(async () => {
        const { default: ivm } = await import('isolated-vm');
        const isolate = new ivm.Isolate({ memoryLimit: 16 });
        try {
          const context = isolate.createContextSync();
          const result = context.evalSync('[6, 7].reduce((a, b) => a * b)');
          if (result !== 42) throw new Error(`isolate evaluated to ${String(result)}, expected 42`);
          return 'isolated-vm: evaluated 6*7 = 42';
        } finally {
          isolate.dispose();
        }
      }),
      esbuild: await attempt(async () => {
        const esbuild = await import('esbuild');
        const out = await esbuild.build({
          stdin: { contents: "import { n } from 'virtual:answer'; export const answer: number = n;", loader: 'ts', resolveDir: '/' },
          bundle: true,
          write: false,
          format: 'esm',
          logLevel: 'silent',
          plugins: [
            {
              name: 'virtual',
              setup(b) {
                b.onResolve({ filter: /^virtual:/ }, (a) => ({ path: a.path, namespace: 'virtual' }));
                b.onLoad({ filter: /.*/, namespace: 'virtual' }, () => ({ contents: 'export const n = 42;', loader: 'js' }));
              },
            },
          ],
        });
        const text = out.outputFiles[0]?.text ?? '';
        if (!text.includes('42') || text.includes(': number')) throw new Error('esbuild produced unexpected output');
        return `esbuild ${esbuild.version}: bundled a TypeScript module`;
      }),
    },
  };
  write(`${JSON.stringify(report, null, 2)}\n`);
  return Object.values(report.checks).every((c) => c.ok) ? 0 : 1;
}
