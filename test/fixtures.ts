/** Valid specs shared by the API tests. */

export const bundleSpec = (profileAgents = ['triage']) => ({
  extension_name: 'acme',
  bundle: {
    name: 'support',
    description: 'Support desk',
    profiles: [{
      name: 'default',
      description: 'Triage desk',
      channels: { primary: 'desk', items: [{ name: 'desk', description: 'Main desk' }] },
      agents: profileAgents.map((name) => ({
        path: `agents/${name}`,
        agent: { name, prompt: `You are ${name}.` },
        soul: { source_path: 'SOUL.md', body: `# ${name}\n\nCalm and precise.\n` },
      })),
      jobs: [{
        name: 'daily', agent: profileAgents[0], prompt: 'Summarize the queue.',
        schedule: { mode: 'cron', expr: '0 9 * * *' }, enabled: true,
        retry: { strategy: 'none' }, fire_limit: { max: 12, window: '1h' },
      }],
      triggers: [{
        name: 'on-ticket', agent: profileAgents[0], prompt: 'Handle the ticket.', event: 'ticket.created',
        retry: { strategy: 'none' }, fire_limit: { max: 12, window: '1h' },
      }],
      bridges: [{ name: 'slack', extension_name: 'acme', platform: 'slack', display_name: 'Slack', secret_slots: [{ name: 'token', kind: 'secret', description: 'Bot token' }] }],
    }],
  },
});
