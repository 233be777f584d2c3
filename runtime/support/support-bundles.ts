import { randomUUID } from 'node:crypto';
import { Queue, Worker, type ConnectionOptions, type Job } from 'bullmq';
import type { Logger } from 'pino';
import type { ArtifactStore } from '../../store/artifact-store.ts';
import { quietQueue } from '../../store/connections.ts';
import { ConflictError, InputError, NotFoundError, ValidationError } from '../../store/errors.ts';
import type { SupportStore } from '../../store/support-store.ts';
import { repeatedErrors } from '../process/repeated-errors.ts';
import { redactText } from '../sessions/redact.ts';
import type { SupportBundleBuilder } from './bundle-builder.ts';
import { BUNDLE_TTL_MS, type BundleRequest, type SupportBundleOperation } from './types.ts';

/** SUPPORT_QUEUE is the BullMQ queue bundle builds run on. */
export const SUPPORT_QUEUE = 'support-bundle';
/** REQUEST_FIELDS are the fields of a bundle request (unknown ones are the route's field validation: api/body-rule.ts). */
export const REQUEST_FIELDS = ['yes', 'include_status'];
/** A build gets this many tries: a controller killed mid-build leaves the job to another after its lock lapses. */
const ATTEMPTS = 3;

/** SupportBundlesOptions wire the support family to its stores, its queue and the builder (controller role). */
export interface SupportBundlesOptions {
  store: SupportStore;
  artifacts: ArtifactStore;
  /** A BullMQ connection (maxRetriesPerRequest: null). */
  connection: ConnectionOptions;
  /** The queue's key prefix, a hash tag of its own (`<prefix>{q:support-bundle}`). */
  queuePrefix: string;
  logger: Logger;
  /** Builds bundles; only a process that runs the worker needs it. */
  builder?: SupportBundleBuilder;
  /** Counts finished builds by outcome (completed, failed). */
  onOutcome?: (outcome: 'completed' | 'failed', seconds: number) => void;
}

/** fileNameOf is a bundle's file name, `svc-support-bundle-<YYYYMMDDTHHMMSSZ>.tar.gz` (UTC), from its request time. */
export const fileNameOf = (createdAt: string) => `svc-support-bundle-${createdAt.slice(0, 19).replace(/[-:]/g, '')}Z.tar.gz`;

/**
 * SupportBundles is the support family: a request becomes an operation in Redis and a BullMQ
 * job any controller process may run; the built archive goes to the artifact store under its SHA-256, kept as long
 * as its operation (24 h from the request), so any api replica serves the status and the download.
 */
export class SupportBundles {
  private readonly queue: Queue;
  private worker?: Worker;

  constructor(private readonly o: SupportBundlesOptions) {
    this.queue = quietQueue(new Queue(SUPPORT_QUEUE, { connection: o.connection, prefix: o.queuePrefix }));
  }

  /**
   * request decodes a bundle request (consent `yes: true` is required: 400 `bundle_consent_required`) and queues
   * the build; it answers the pending operation.
   */
  async request(body: Record<string, unknown>): Promise<SupportBundleOperation> {
    const problems: Record<string, string> = {};
    if (body.include_status !== undefined && typeof body.include_status !== 'boolean') problems.include_status = 'must be a boolean';
    if (body.yes !== true) {
      throw new InputError('a support bundle holds diagnostics of the whole service; send {"yes": true} to consent to building one', 'bundle_consent_required', { yes: 'must be true' });
    }
    if (Object.keys(problems).length) throw new ValidationError(Object.entries(problems).map(([k, v]) => `${k} ${v}`).join('; '), 'invalid_body', problems);
    const req: BundleRequest = { include_status: body.include_status !== false };
    const now = new Date();
    const id = randomUUID();
    const op: SupportBundleOperation = {
      operation_id: id, status: 'pending', created_at: now.toISOString(), updated_at: now.toISOString(), completed_at: '', failure_reason: '',
      file_name: fileNameOf(now.toISOString()), status_url: `/api/support/bundles/${id}`, download_url: '', size_bytes: 0, sha256: '',
      include_status: req.include_status, manifest: null,
    };
    await this.o.store.create(op, now.getTime() + BUNDLE_TTL_MS);
    try {
      // NOTE: the job id is the operation id: adding it again (a retried request handler) adds nothing.
      await this.queue.add('build', { operation_id: id }, {
        jobId: id, attempts: ATTEMPTS, backoff: { type: 'exponential', delay: 1000 },
        removeOnComplete: { age: BUNDLE_TTL_MS / 1000 }, removeOnFail: { age: BUNDLE_TTL_MS / 1000 },
      });
    } catch (err) {
      await this.o.store.advance<SupportBundleOperation>(id, { status: 'failed', failure_reason: 'the build could not be queued', updated_at: new Date().toISOString() }, ['pending']);
      throw err;
    }
    return op;
  }

  /** get returns an operation; 404 when it is unknown or expired. */
  async get(id: string): Promise<SupportBundleOperation> {
    const op = await this.o.store.get<SupportBundleOperation>(id);
    if (!op) throw new NotFoundError(`support bundle operation "${id}" does not exist (operations are kept 24 h)`, 'bundle_operation_not_found', { operation_id: id });
    return op;
  }

  /** download returns a completed operation's archive: 404 unknown, 409 before completion, 404 when the archive is gone. */
  async download(id: string): Promise<{ fileName: string; bytes: Buffer }> {
    const op = await this.get(id);
    if (op.status !== 'completed') {
      throw new ConflictError(`support bundle "${id}" is ${op.status}; download it once it is completed`, 'bundle_not_ready', { operation_id: id, status: op.status });
    }
    const bytes = await this.o.artifacts.get(op.sha256);
    if (!bytes) throw new NotFoundError(`the archive of support bundle "${id}" is no longer kept`, 'bundle_archive_gone', { operation_id: id });
    return { fileName: op.file_name, bytes };
  }

  /** startWorker runs bundle builds in this process (controller role), one at a time. */
  startWorker(): void {
    const { o } = this;
    if (!o.builder) throw new Error('SupportBundles.startWorker needs a builder');
    this.worker = new Worker<{ operation_id: string }>(SUPPORT_QUEUE, (job) => this.build(job), { connection: o.connection, prefix: o.queuePrefix, concurrency: 1 });
    this.worker.on('error', repeatedErrors.listener(o.logger, 'error', 'support bundle worker error'));
  }

  /** build runs one job: pending (or a killed attempt's running) → running → completed, or failed on its last try. */
  private async build(job: Job<{ operation_id: string }>): Promise<void> {
    const { o } = this;
    const id = job.data.operation_id;
    const began = Date.now();
    const started = await o.store.advance<SupportBundleOperation>(id, { status: 'running', updated_at: new Date().toISOString() }, ['pending', 'running']);
    if (started.outcome !== 'updated') return;
    try {
      const built = await o.builder!.build(started.op);
      // NOTE: the archive lives exactly as long as its operation, whatever the build took.
      const ttl = await o.store.ttlMs(id);
      if (!ttl) return;
      const sha256 = await o.artifacts.put(built.archive, ttl);
      const now = new Date().toISOString();
      await o.store.advance<SupportBundleOperation>(id, {
        status: 'completed', updated_at: now, completed_at: now, size_bytes: built.archive.length, sha256,
        download_url: `/api/support/bundles/${id}/download`, manifest: built.manifest,
      }, ['running']);
      o.onOutcome?.('completed', (Date.now() - began) / 1000);
      o.logger.info({ operation_id: id, bytes: built.archive.length, ms: Date.now() - began }, 'support bundle built');
    } catch (err) {
      const last = job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
      const reason = redactText((err as Error).message).slice(0, 1000);
      o.logger.warn({ operation_id: id, attempt: job.attemptsMade + 1, err: reason }, 'support bundle build failed');
      if (!last) throw err;
      await o.store.advance<SupportBundleOperation>(id, { status: 'failed', updated_at: new Date().toISOString(), failure_reason: reason }, ['running']);
      o.onOutcome?.('failed', (Date.now() - began) / 1000);
    }
  }

  /** depth counts the builds waiting, delayed or running. */
  async depth(): Promise<number> {
    const c = await this.queue.getJobCounts('waiting', 'delayed', 'active', 'prioritized');
    return Object.values(c).reduce((a, b) => a + b, 0);
  }

  async stop(): Promise<void> {
    await this.worker?.close();
    await this.queue.close();
  }
}
