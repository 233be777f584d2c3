// The process entry point: `node --import tsx runtime/main.ts` (what `make run` starts).
import { ConfigError, loadConfig } from './process/config.ts';
import { Service } from './process/service.ts';

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
    if (stopping) {
      service.logger.warn({ signal }, 'second signal: exiting without finishing the shutdown');
      process.exit(1);
    }
    stopping = true;
    service.logger.info({ signal }, 'shutting down');
    // NOTE: a shutdown that cannot finish (e.g. Redis is gone, so its writes never settle) still ends the
    // process, by SHUTDOWN_TIMEOUT (the chart's termination grace is longer).
    setTimeout(() => {
      service.logger.error({ timeout_ms: config.shutdownTimeoutMs }, 'shutdown did not finish in time; exiting');
      process.exit(1);
    }, config.shutdownTimeoutMs).unref();
    service.stop().then(() => process.exit(0), (err) => {
      service.logger.error({ err }, 'unclean shutdown');
      process.exit(1);
    });
  });
}
