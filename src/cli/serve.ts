import { defineCommand } from 'citty';
import { startServer } from '../http/server.ts';
import { publicUrlOf } from '../config/index.ts';
import { configArg, configFrom } from './common.ts';

export default defineCommand({
  meta: { name: 'serve', description: 'Run the server: integrations, runtime endpoints, management API and webhook delivery' },
  args: {
    ...configArg,
    port: { type: 'string', description: 'override server.port' },
  },
  async run({ args }) {
    const config = configFrom(args);
    if (args.port !== undefined) {
      const port = Number(args.port);
      if (!Number.isInteger(port) || port < 0 || port > 65535) {
        const { SwitchyardError } = await import('../errors.ts');
        throw new SwitchyardError('bad_request', `--port must be a whole number from 0 to 65535, got "${args.port}"`);
      }
      config.server.port = port;
      if (!config.server.public_url) config.publicUrl = publicUrlOf(config);
    }
    const server = await startServer(config);
    await new Promise<void>((resolve) => {
      let signals = 0;
      const stop = (sig: string) => {
        signals++;
        if (signals > 1) {
          server.services.log.warn('second signal: exiting now', { signal: sig });
          process.exit(1);
        }
        server.services.log.info('shutting down', { signal: sig });
        server.close().then(resolve, resolve);
      };
      process.on('SIGINT', () => stop('SIGINT'));
      process.on('SIGTERM', () => stop('SIGTERM'));
    });
    return 0;
  },
});
