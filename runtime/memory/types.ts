/**
 * Types of the memory family (spec/concepts.md "Memory", spec/gaps.md §5.1, §5.3). NOTE: they are defined in
 * store/memory-types.ts, because the store keeps these shapes and imports nothing from runtime (the dependency rule).
 */
export * from '../../store/memory-types.ts';
