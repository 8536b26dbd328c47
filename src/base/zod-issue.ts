// One zod issue as the `why` of an error whose field path is said separately: a type mismatch
// in the same words whichever validator found it ("expected string, received number").
import type { ZodIssue } from 'zod/v3';

export function issueText(issue: ZodIssue): string {
  return issue.code === 'invalid_type' ? `expected ${issue.expected}, received ${issue.received}` : issue.message;
}
