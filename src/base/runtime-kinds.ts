// The sandbox runtimes knit serves: the one list the type, API validation, the wire and KNI
// mappings, the CLI, the CNI annotation and Version derive from. Adding a runtime adds its
// name here, its value to proto knit.v1.Runtime (test/unit/runtime-kinds.test.ts keeps the two
// in step), and its strategy to runtimes/index.ts (docs/architecture.md, "Adding a runtime").

export const RUNTIME_KINDS = ['runc', 'kata', 'kubevirt'] as const;
export type RuntimeKind = (typeof RUNTIME_KINDS)[number];

/** What a request that names no runtime gets. */
export const DEFAULT_RUNTIME: RuntimeKind = 'runc';

/** The knit.v1.Runtime enum value names: RUNC, KATA, KUBEVIRT, and the unset value. */
export type RuntimeWireName = 'RUNTIME_UNSPECIFIED' | Uppercase<RuntimeKind>;

export function isRuntimeKind(v: string): v is RuntimeKind {
  return (RUNTIME_KINDS as readonly string[]).includes(v);
}

export function runtimeWireName(kind: RuntimeKind): Uppercase<RuntimeKind> {
  return kind.toUpperCase() as Uppercase<RuntimeKind>;
}

/** A wire enum name back to its kind; RUNTIME_UNSPECIFIED means the default. */
export function runtimeFromWireName(name: string): RuntimeKind | undefined {
  if (name === 'RUNTIME_UNSPECIFIED') return DEFAULT_RUNTIME;
  const kind = name.toLowerCase();
  return name === name.toUpperCase() && isRuntimeKind(kind) ? kind : undefined;
}

/** "runc, kata, kubevirt", for messages that list the choices. */
export const RUNTIME_CHOICES = RUNTIME_KINDS.join(', ');
