// The process entry point: `node --import tsx runtime/main.ts` (what `make run` starts).
import { ConfigError, loadConfig } from './config.ts';
import { Service } from './service.ts';

let config;
try {
  config = loadConfig();
} catch (err) {
  if (err instanceof ConfigError) {
    process.stderr.write(`${err.message}\n`);
    process.exit(2);
  }
  throw err;
}

const service = new Service(config);
try {
  await service.start();
} catch (err) {
  service.logger.fatal({ err }, `cannot start: ${(err as Error).message}`);
  process.exit(1);
}

let stopping = false;
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    service.logger.info({ signal }, 'shutting down');
    service.stop().then(() => process.exit(0), (err) => {
      service.logger.error({ err }, 'unclean shutdown');
      process.exit(1);
    });
  });
}
