import { fileURLToPath } from 'node:url';

/**
 * BUNDLED_DIR holds the skills that ship with the service. NOTE: its own file so that runtime/security can allow
 * it without importing the catalog (which depends on the security rules).
 */
export const BUNDLED_DIR = fileURLToPath(new URL('./bundled/', import.meta.url));
