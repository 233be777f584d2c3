import { hostMatches, parseEgressAllowlist } from './egress.ts';
import type { AuthMode, SecretRef } from './types.ts';

/** VaultHostLists reads what the vault knows of secrets' destinations (runtime/vault/vault-service.ts). */
export interface VaultHostLists {
  /** hostListsOf answers, per ref: undefined (no such secret), null (a secret without allowed_hosts) or its list. */
  hostListsOf(refs: readonly string[]): Promise<Map<string, string[] | null | undefined>>;
}

/**
 * SecretDestinations binds vault secrets to hosts: a `vault:` ref sent to a host (a webhook bridge's secret
 * header) may go only to a host its secret's `allowed_hosts` names, which only an admin writes (PUT
 * /api/vault/secrets). With authentication (AUTH_MODE token or kubernetes) a secret without allowed_hosts is sent
 * nowhere; with AUTH_MODE=none (one local user) it may go anywhere the egress rule allows, unless it has a list.
 * NOTE: so an operator, who may write a bridge but not a secret, cannot point an admin's secret at a new host.
 * `env:` refs are the service's own environment, allowed by SECRET_ENV_ALLOWLIST, and not bound to hosts.
 */
export class SecretDestinations {
  private vault?: VaultHostLists;

  constructor(private readonly authMode: AuthMode) {}

  /** attachVault makes vault refs checkable (runtime/process/service.ts); until then none is refused here. */
  attachVault(vault: VaultHostLists): void {
    this.vault = vault;
  }

  /**
   * refusals checks the refs that would be sent to `url`'s host: why each vault ref may not go there, by its
   * field path. A ref whose secret does not exist is not refused here (it does not resolve either).
   */
  async refusals(refs: readonly SecretRef[], url: string): Promise<Record<string, string>> {
    const vaultRefs = refs.filter((r) => r.ref.startsWith('vault:'));
    if (!vaultRefs.length || !this.vault) return {};
    let host = '';
    try { host = new URL(url).hostname; } catch { return {}; }
    const lists = await this.vault.hostListsOf([...new Set(vaultRefs.map((r) => r.ref))]);
    const out: Record<string, string> = {};
    for (const r of vaultRefs) {
      const list = lists.get(r.ref);
      if (list === undefined) continue;
      if (list === null) {
        if (this.authMode !== 'none') out[r.path] = `${r.ref} has no allowed_hosts: with authentication a vault secret is sent only to hosts an admin lists (PUT /api/vault/secrets with allowed_hosts)`;
        continue;
      }
      if (!hostMatches(parseEgressAllowlist(list).rules, host)) out[r.path] = `${r.ref} may be sent only to ${list.join(', ')}, not to ${host} (its allowed_hosts)`;
    }
    return out;
  }
}
