// The suites `make test` runs a second time against a 3-master Redis Cluster that each suite's harness starts
// itself (TEST_REDIS=cluster: test/helpers/redis-cluster.ts). A family joins with one line here. The cluster
// refuses any script or MULTI whose keys span two slots (CROSSSLOT), including keys a script builds from ARGV,
// which the run-wide SlotGuard of the main run (test/helpers/slot-guard.ts) cannot see.
// NOTE: each family's core files, not all of them, so the run adds about 5 minutes to `make test` (on the machine's
// Node only): left out are the files whose subject is not the store (agent process pooling and ACP auth,
// CronJob policies, status wording, own-event filters), which the one-Redis runs cover.
const base = require('../.mocharc.cjs');

module.exports = {
  ...base,
  spec: [
    // connections (a turn's commands in one write)
    'test/store/connections.test.ts',
    // resources (records, status, indexes, change log, watch, reconcile leases)
    'test/api/resources.test.ts',
    'test/api/resource-status.test.ts',
    'test/controllers/batch-reconciler.test.ts',
    'test/fault/redis-restart.test.ts',
    // sessions (events, leases, commands, prompt queue, start signals)
    'test/api/sessions.test.ts',
    'test/sessions/start-signal.test.ts',
    // tools (approvals, MCP servers, policy)
    'test/api/tools.test.ts',
    'test/tools/*.test.ts',
    // automation (jobs, triggers, runs; several controller processes)
    'test/automation/jobs.test.ts',
    'test/automation/runs.test.ts',
    'test/automation/triggers.test.ts',
    'test/automation/cluster.test.ts',
    // hooks (gate, async dispatcher, several controller processes)
    'test/hooks/*.test.ts',
    // tasks (claims, leases, scheduler)
    'test/tasks/*.test.ts',
    // wave 3: loop runs (a tag per run), memory ledgers and dreams, the model catalog, the marketplace, extensions
    'test/loops/runs.test.ts',
    'test/memory/ledger-api.test.ts',
    'test/memory/dream-api.test.ts',
    'test/models/catalog.test.ts',
    'test/marketplace/marketplace.test.ts',
    'test/extensions/extensions.test.ts',
  ],
};
