/** BundleCatalogEntry is one bundle of the catalog with a summary of each profile. */
export interface BundleCatalogEntry {
  bundle_name: string;
  description: string;
  extension_name: string;
  profiles: {
    name: string; description: string; agent_count: number; bridge_count: number; job_count: number; trigger_count: number;
    channels: { name: string; description: string; primary: boolean }[];
  }[];
}
