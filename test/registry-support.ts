/**
 * What the registry's start-up tests share: a folder that holds the start-up pass on purpose. Its
 * script imports a FIFO, so esbuild blocks reading it until the test writes to it: "still
 * loading" is a state the test controls, not a race it hopes to win.
 */
import { execFileSync } from 'node:child_process';
import { closeSync, constants, mkdirSync, openSync, renameSync, writeFileSync, writeSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { waitFor } from './helpers/index.ts';

/**
 * Integration `folder` (named the same) in `dir`, answering its name; its bundle waits until
 * `release()`. `entered()` resolves once the bundler is reading the pipe (the folder is being loaded).
 */
export function gatedIntegration(dir: string, folder: string): { entered(): Promise<void>; release(): Promise<void> } {
  mkdirSync(join(dir, folder), { recursive: true });
  writeFileSync(
    join(dir, folder, 'platform-manifest.yaml'),
    `name: ${folder}\ntitle: ${folder}\ndescription: test\norganization: o\nvisibility: private\nscopes: []\nscript: index.ts\n`,
  );
  writeFileSync(
    join(dir, folder, 'index.ts'),
    `import { createIntegration } from '@switchyard/runtime';\nimport { marker } from './gate.ts';\nexport default createIntegration({ fetch: async () => new Response(marker) });\n`,
  );
  const fifo = join(dir, folder, 'gate.ts');
  execFileSync('mkfifo', [fifo]);
  const content = `export const marker = '${folder}';\n`;
  let writer: number | undefined;
  return {
    async entered() {
      // A non-blocking open for writing succeeds only once a reader has the pipe open.
      await waitFor(() => {
        try {
          writer = openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK);
          return true;
        } catch {
          return false;
        }
      }, 10_000);
    },
    async release() {
      if (writer !== undefined) {
        writeSync(writer, content);
        closeSync(writer);
      } else await writeFile(fifo, content); // waits (off the event loop) for a reader
      // A regular file from now on: a later reload must not wait on the pipe again.
      writeFileSync(`${fifo}.new`, `export const marker = '${folder}';\n`);
      renameSync(`${fifo}.new`, fifo);
    },
  };
}
