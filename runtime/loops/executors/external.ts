import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { EventBus } from '../../../store/event-bus.ts';
import type { LoopStore } from '../../../store/loop-store.ts';
import type { SessionStore } from '../../../store/session-store.ts';
import type { ExecPolicy } from '../../security/exec-policy.ts';
import type { SessionService } from '../../sessions/session-service.ts';
import type { LoopEngineControl } from '../types.ts';
import { AgentJudgeCriterion } from './agent-judge.ts';
import { AgentTurns } from './agent-turns.ts';
import { CommandCriterion } from './command.ts';
import type { GateExecutor } from './gate.ts';
import type { ExecutorRegistry } from './index.ts';
import { RunAgentExecutor } from './run-agent.ts';
import { ToolExecutor, type ToolInvoker } from './tool.ts';
import { LoopEventWatcher, WatchEventsExecutor } from './watch-events.ts';

/** ExternalExecutorsOptions are the families the executors that reach outside a run call. */
export interface ExternalExecutorsOptions {
  sessions: SessionService;
  sessionStore: SessionStore;
  bus: EventBus;
  /** A connection of the store (executor bookkeeping under each run's hash tag). */
  redis: Redis;
  /** The store's key prefix (`svc:`). */
  prefix: string;
  tools: ToolInvoker;
  exec: ExecPolicy;
  workspaceRoot(workspaceId: string): Promise<string>;
  logger: Logger;
  /** How long a finished agent turn's session stays live (agent-turns.ts). */
  sessionLingerMs?: number;
}

/**
 * ExternalExecutors are the loop node executors that call other families: `run-agent` (sessions), every tool id
 * (the tool runtime), the `command` and `agent-judge` gate criteria, and `watch-events` (the event bus), built once
 * per controller process. `register` adds them to the engine's registry; `attach` gives the event watcher the
 * engine it wakes nodes through.
 */
export class ExternalExecutors {
  readonly turns: AgentTurns;
  readonly runAgent: RunAgentExecutor;
  readonly tool: ToolExecutor;
  readonly command: CommandCriterion;
  readonly judge: AgentJudgeCriterion;
  readonly watch: WatchEventsExecutor;
  private watcher?: LoopEventWatcher;

  constructor(private readonly o: ExternalExecutorsOptions) {
    this.turns = new AgentTurns({ sessions: o.sessions, sessionStore: o.sessionStore, bus: o.bus, redis: o.redis, prefix: o.prefix, logger: o.logger, lingerMs: o.sessionLingerMs });
    this.runAgent = new RunAgentExecutor(this.turns);
    this.tool = new ToolExecutor(o.tools);
    this.command = new CommandCriterion({ exec: o.exec, workspaceRoot: o.workspaceRoot });
    this.judge = new AgentJudgeCriterion({ turns: this.turns, redis: o.redis, prefix: o.prefix });
    this.watch = new WatchEventsExecutor({ redis: o.redis, bus: o.bus, prefix: o.prefix });
  }

  /** register adds run-agent and watch-events, the tool fallback, and the command and agent-judge criteria of the gate. */
  register(registry: ExecutorRegistry): ExecutorRegistry {
    registry.register(this.runAgent).register(this.watch).setToolFallback(this.tool);
    const gate = registry.get('gate') as GateExecutor | undefined;
    if (gate && !gate.has('command')) gate.register(this.command);
    if (gate && !gate.has('agent-judge')) gate.register(this.judge);
    return registry;
  }

  async start(): Promise<void> {
    await this.turns.start();
  }

  /** attach starts the watch-events watcher on the engine's store and control (once the engine exists). */
  async attach(store: LoopStore, control: LoopEngineControl, sweepMs?: number): Promise<void> {
    this.watcher = new LoopEventWatcher({ redis: this.o.redis, bus: this.o.bus, store, control, prefix: this.o.prefix, logger: this.o.logger, sweepMs });
    await this.watcher.start();
  }

  async stop(): Promise<void> {
    await this.watcher?.stop();
    await this.turns.stop();
  }
}
