import { defineConfig } from 'vite';

// The web console: Preact, built to api/console/dist and served by the API at `/` (api/console.ts).
export default defineConfig({
  root: import.meta.dirname,
  base: '/',
  build: { outDir: 'dist', emptyOutDir: true, assetsDir: 'assets', sourcemap: false, target: 'es2022' },
  logLevel: 'warn',
});
