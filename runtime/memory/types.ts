/**
 * Types of the memory family. NOTE: they are defined in
 * store/memory-types.ts, because the store keeps these shapes and imports nothing from runtime (the dependency rule).
 */
export * from '../../store/memory-types.ts';
