// zod issues as config problems a person can act on: the offending value quoted, one problem
// per unknown key (with the key in the path, so its line can be found).

import type { ZodIssue } from 'zod/v3';
import type { ConfigIssue } from './checks.js';

export function fromZodIssues(issues: readonly ZodIssue[], input: unknown): ConfigIssue[] {
  return issues.flatMap((issue): ConfigIssue[] => {
    const path = issue.path.map((p) => (typeof p === 'number' ? p : String(p)));
    if (issue.code === 'unrecognized_keys') {
      return issue.keys.map((key) => ({ path: [...path, key], message: 'unknown key' }));
    }
    return [{ path, message: describeIssue(issue, valueAt(input, path)) }];
  });
}

function describeIssue(issue: ZodIssue, value: unknown): string {
  switch (issue.code) {
    case 'invalid_type':
      if (value === undefined) return 'is required';
      return `expected ${issue.expected === 'integer' ? 'an integer' : issue.expected}, got ${describeValue(value)}`;
    case 'invalid_enum_value':
      return `${describeValue(value)} is not one of ${issue.options.map((v) => JSON.stringify(v)).join(', ')}`;
    case 'invalid_literal':
      return `${describeValue(value)} is not ${JSON.stringify(issue.expected)}`;
    case 'too_small':
      if (issue.type === 'array') return `needs at least ${issue.minimum} ${Number(issue.minimum) === 1 ? 'entry' : 'entries'}`;
      if (issue.type === 'string') return 'must not be empty';
      return `${describeValue(value)} is below the minimum ${issue.minimum}`;
    case 'too_big':
      return `${describeValue(value)} is above the maximum ${issue.maximum}`;
    default:
      return issue.message;
  }
}

function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'an object';
  const text = JSON.stringify(value);
  return text.length > 60 ? `${text.slice(0, 57)}..."` : text;
}

function valueAt(root: unknown, path: readonly (string | number)[]): unknown {
  let v = root;
  for (const seg of path) {
    if (v === null || typeof v !== 'object' || !Object.prototype.hasOwnProperty.call(v, seg)) return undefined;
    v = (v as Record<string | number, unknown>)[seg];
  }
  return v;
}
