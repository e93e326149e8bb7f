/**
 * The single executable's entry, bundled by scripts/build.ts into one CommonJS file. It unpacks
 * the native files (first start only), then dispatches argv. Everything else is imported
 * dynamically so nothing, esbuild's JS API in particular, loads before ESBUILD_BINARY_PATH is set.
 */
import { SwitchyardError, formatError } from '../../src/errors.ts';
import { SANDBOX_WORKER_FLAG, prepareNativeFiles } from '../../src/native/index.ts';

async function main(argv: string[]): Promise<number | undefined> {
  try {
    prepareNativeFiles();
  } catch (e) {
    const err = e instanceof SwitchyardError ? e : new SwitchyardError('internal', (e as Error)?.message ?? String(e));
    process.stderr.write(`switchyard: ${formatError(err)}\n`);
    return 2;
  }
  if (argv[0] === '--self-check') {
    const { selfCheck } = await import('../../src/native/self-check.ts');
    return selfCheck();
  }
  if (argv[0] === SANDBOX_WORKER_FLAG) {
    // The sandbox's worker process (src/sandbox workerCommand()): it lives on its IPC channel.
    const { runSandboxWorker } = await import('../../src/sandbox/index.ts');
    await runSandboxWorker();
    return undefined;
  }
  const { cli } = await import('../../src/main.ts');
  if (process.env.SWITCHYARD_SERVING) {
    // A serving process forked by the supervisor (cluster) gets the module path first: here, itself.
    await cli(argv[0] === process.execPath ? argv.slice(1) : argv);
    // Its IPC channel would keep it alive after a failed start.
    process.exit(process.exitCode === undefined ? 0 : Number(process.exitCode));
  }
  await cli(argv);
  return process.exitCode === undefined ? 0 : Number(process.exitCode);
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code !== undefined) process.exitCode = code;
  },
  (e) => {
    process.stderr.write(`switchyard: unexpected error: ${(e as Error)?.stack ?? String(e)}\n`);
    process.exitCode = 1;
  },
);
