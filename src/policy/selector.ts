// Label selectors (metav1.LabelSelector) as the API defines them: matchLabels and every
// matchExpression must hold; In / NotIn / Exists / DoesNotExist, where NotIn and DoesNotExist
// also hold for a pod that lacks the key (k8s.io/apimachinery pkg/labels/selector.go). An
// empty selector selects everything.
import type { LabelSelector } from './types.js';

export interface Selector {
  /** Canonical text: equal selectors have equal keys (used to share work). */
  key: string;
  matches(labels: Record<string, string>): boolean;
}

const OPERATORS = new Set(['In', 'NotIn', 'Exists', 'DoesNotExist']);

/** A selector, or why it cannot be one (an operator the API would have refused). */
export function compileSelector(s: LabelSelector, field: string): Selector | { problem: string } {
  const labels = Object.entries(s.matchLabels ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const exprs = (s.matchExpressions ?? []).map((e, i) => ({ ...e, i }));
  for (const e of exprs) {
    if (!OPERATORS.has(e.operator)) return { problem: `${field}.matchExpressions[${e.i}].operator: ${JSON.stringify(String(e.operator).slice(0, 20))} is not In, NotIn, Exists or DoesNotExist` };
    const values = e.values ?? [];
    if ((e.operator === 'In' || e.operator === 'NotIn') && !values.length) return { problem: `${field}.matchExpressions[${e.i}].values: ${e.operator} needs at least one value` };
    if ((e.operator === 'Exists' || e.operator === 'DoesNotExist') && values.length) return { problem: `${field}.matchExpressions[${e.i}].values: ${e.operator} takes no values` };
  }
  const canon = exprs.map((e) => ({ key: e.key, operator: e.operator, values: [...(e.values ?? [])].sort() })).sort((a, b) => JSON.stringify(a) < JSON.stringify(b) ? -1 : 1);
  const key = JSON.stringify([labels, canon]);
  const sets = canon.map((e) => ({ ...e, set: new Set(e.values) }));
  return {
    key,
    matches(l) {
      for (const [k, v] of labels) if (l[k] !== v) return false;
      for (const e of sets) {
        const has = Object.prototype.hasOwnProperty.call(l, e.key);
        switch (e.operator) {
          case 'In': if (!has || !e.set.has(l[e.key]!)) return false; break;
          case 'NotIn': if (has && e.set.has(l[e.key]!)) return false; break;
          case 'Exists': if (!has) return false; break;
          case 'DoesNotExist': if (has) return false; break;
        }
      }
      return true;
    },
  };
}

export const everything: Selector = { key: '[[],[]]', matches: () => true };
