import type { Logger } from 'pino';
import type { Automation } from '../runtime/automation/index.ts';
import type { AgentCatalog } from '../runtime/agents/agent-catalog.ts';
import type { HeartbeatWakes } from '../runtime/agents/heartbeat-wakes.ts';
import type { RoleResolver } from '../runtime/agents/roles.ts';
import type { Authenticator } from '../runtime/process/auth.ts';
import type { Hooks } from '../runtime/hooks/hooks.ts';
import type { Metrics } from '../runtime/process/metrics.ts';
import type { Settings } from '../runtime/process/settings.ts';
import type { ReconcileWaiter } from '../runtime/resources/reconcile-waiter.ts';
import type { PathConfinement } from '../runtime/security/paths.ts';
import type { SecurityPolicy } from '../runtime/security/policy.ts';
import type { SessionService } from '../runtime/sessions/session-service.ts';
import type { SessionTailHub } from '../runtime/sessions/session-tail.ts';
import type { SkillCatalog } from '../runtime/skills/catalog.ts';
import type { McpPool } from '../runtime/tools/mcp.ts';
import type { ToolRuntime } from '../runtime/tools/runtime.ts';
import type { WorkspaceService } from '../runtime/workspaces/workspace-service.ts';
import type { ResourceStore } from '../store/resource-store.ts';
import type { SessionStore } from '../store/session-store.ts';
import type { EventBus } from '../store/event-bus.ts';
import type { TaskService } from '../runtime/tasks/service.ts';
import type { SupportBundles } from '../runtime/support/support-bundles.ts';
import type { VaultService } from '../runtime/vault/vault-service.ts';
import type { ModelCatalog } from '../runtime/models/catalog.ts';
import type { Memory } from '../runtime/memory/index.ts';
import type { LedgerService } from '../runtime/memory/ledger-service.ts';
import type { DreamService } from '../runtime/memory/dream-service.ts';
import type { Marketplace } from '../runtime/marketplace/marketplace.ts';
import type { SkillInstalls } from '../runtime/skills/installs.ts';
import type { Loops } from '../runtime/loops/index.ts';
import type { ExtensionService } from '../runtime/extensions/service.ts';
import type { ExtensionToolHost } from '../runtime/extensions/tool-host.ts';
import type { ReplicaAck } from './replica-ack.ts';
import type { StreamSlots } from './stream-slots.ts';

/** Readiness reports whether the process can serve: Redis answers and, where they run, controllers run. */
export type Readiness = () => Promise<{ ready: boolean; checks: Record<string, string> }>;

/** AppDeps is what the API role needs from the process. */
export interface AppDeps {
  store: ResourceStore;
  /** The process's one workspace, role and session services (shared with automation and heartbeat wakes). */
  workspaces: WorkspaceService;
  roles: RoleResolver;
  sessionService: SessionService;
  sessions: SessionStore;
  /** Fans each session's new events out to this process's streams. */
  tails: SessionTailHub;
  waiter: ReconcileWaiter;
  metrics: Metrics;
  logger: Logger;
  readiness: Readiness;
  queueDepth?: () => Promise<Map<string, number>>;
  /** Checks callers' bearer tokens; undefined = no authentication (loopback only). */
  authenticator?: Authenticator;
  /** The layered configuration files (global and per workspace). */
  settings: Settings;
  dataDir: string;
  /** This process's MCP client connections (closed by the service on stop). */
  mcp: McpPool;
  /** Execution, secret-ref, workspace-root and origin rules (runtime/security/). */
  security: SecurityPolicy;
  /** The event bus (notification presets announce their changes on it; /api/events/stream serves it). */
  bus: EventBus;
  /** Heartbeat wakes: the wake route, the wake history and the heartbeat tools. */
  heartbeat: HeartbeatWakes;
  /** The automation family (jobs, triggers, runs, webhooks). */
  automation: Automation;
  /** hook.binding runtime: the sync gate of sessions and tools, and the run records (runtime/hooks/). */
  hooks: Hooks;
  /** The task family: tasks, runs, leases, scheduler. */
  tasks: TaskService;
  /** Support bundles: requests, operations and archives (built by controller processes). */
  support: SupportBundles;
  /** The vault: write-only secrets, rotation and status. */
  vault: VaultService;
  /** The model catalog: listings, source statuses, refreshes (run by controller processes). */
  models: ModelCatalog;
  /** The memory family: memories, decisions, daily logs, recall (runtime/memory/). */
  memory?: Memory;
  /** Session memory ledgers: read, replay, prune, repair. */
  ledgers: LedgerService;
  /** Dream runs: list, status, trigger, get, retry. */
  dreams: DreamService;
  /** The marketplace: pages, search, refresh and MCP installs. */
  marketplace: Marketplace;
  /** Marketplace skill installs (the skills family's marketplace tier). */
  skillInstalls: SkillInstalls;
  /** Loop definitions and runs. */
  loops?: Loops;
  /** Installed extensions: installs, updates, enable/disable, removal. */
  extensions: ExtensionService;
  /** Extension daemons' tools, for the tool catalog and its calls. */
  extensionTools: ExtensionToolHost;
  /** Caps on open streams per caller and in total (STREAMS_PER_CALLER, STREAMS_MAX): every SSE route takes a slot. */
  streams: StreamSlots;
  /** Waits for the replicas REDIS_MIN_REPLICAS_ACK asks for after each successful write (api/replica-ack.ts). */
  replicaAck?: ReplicaAck;
}

/** FeatureDeps is what the runtime-view families (tools, skills, roles, heartbeat) read from. */
export interface FeatureDeps {
  store: ResourceStore;
  workspaces: WorkspaceService;
  agents: AgentCatalog;
  sessions: SessionService;
  settings: Settings;
  dataDir: string;
  /** The path rule for the files names point at (HEARTBEAT.md). */
  paths: PathConfinement;
  tools: ToolRuntime;
  skills: SkillCatalog;
  roles: RoleResolver;
  heartbeat: HeartbeatWakes;
}
