import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Service } from '../../runtime/process/service.ts';
import type { Workspace } from '../../runtime/workspaces/types.ts';
import { testRedis } from './redis-cluster.ts';
import { Client, startService } from './service.ts';

/** FixtureOptions shape a ServiceFixture: extra environment, and whether a workspace is made for each test. */
export interface FixtureOptions {
  /** Extra environment for the service; a function sees the test's directories (e.g. to point a config file there). */
  env?: Record<string, string> | ((dirs: { root: string; dataDir: string }) => Record<string, string>);
  /** Create a workspace rooted at `root` when the service starts (default true). */
  workspace?: boolean;
  /** Start the service before each test (default true); false: each test calls `start(env)` with its own settings. */
  autoStart?: boolean;
}

/**
 * ServiceFixture is the one set-up of the API tests: a real redis-server for the suite, and for each test a fresh
 * store, a service with every role on a free port, a workspace directory (`root`), a `DATA_DIR`, a JSON client
 * and (by default) a workspace; all stopped and removed after the test.
 */
export class ServiceFixture {
  /** One Redis, or a 3-master cluster under TEST_REDIS=cluster. */
  readonly redis = testRedis();
  service!: Service;
  api!: Client;
  root = '';
  dataDir = '';
  ws!: Workspace;

  constructor(private readonly o: FixtureOptions = {}) {}

  /** install registers the suite's mocha hooks; call it inside `describe`. */
  install(): this {
    before(() => this.redis.start());
    after(() => this.redis.destroy());
    beforeEach(() => this.up());
    afterEach(() => this.down());
    return this;
  }

  /** restart stops the service and starts it again on the same store and directories, with more environment. */
  async restart(env: Record<string, string> = {}): Promise<void> {
    await this.service.stop();
    await this.startService(env);
  }

  /** start starts the service with more environment and, unless the options say otherwise, makes the workspace. */
  async start(env: Record<string, string> = {}): Promise<void> {
    await this.startService(env);
    if (this.o.workspace !== false) {
      const res = await this.api.post('/api/workspaces', { root_dir: this.root });
      if (res.status !== 201) throw new Error(`fixture workspace: ${res.status} ${JSON.stringify(res.body)}`);
      this.ws = res.body.workspace;
    }
  }

  private async up(): Promise<void> {
    await this.redis.flush();
    this.root = mkdtempSync(path.join(os.tmpdir(), 'svc-test-'));
    this.dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-test-data-'));
    if (this.o.autoStart !== false) await this.start();
  }

  private async startService(more: Record<string, string> = {}): Promise<void> {
    const dirs = { root: this.root, dataDir: this.dataDir };
    const env = typeof this.o.env === 'function' ? this.o.env(dirs) : this.o.env ?? {};
    this.service = await startService(this.redis.env, { DATA_DIR: this.dataDir, ...env, ...more });
    this.api = new Client(this.service.url);
  }

  private async down(): Promise<void> {
    await this.service?.stop();
    this.service = undefined!;
    rmSync(this.root, { recursive: true, force: true });
    rmSync(this.dataDir, { recursive: true, force: true });
  }
}
