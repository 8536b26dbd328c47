// An API answer that is not a success becomes a KubeApiError that says which call, the HTTP
// status, the Status reason and message, and carries a knit error code that fits.
import test from 'ava';
import { errorFromResponse, errorFromStatus, errorFromTransport } from '../../src/kube/errors.js';

const call = 'GET https://127.0.0.1:6443/api/v1/nodes/n1';

test('a Status body: code, reason, message and the call', (t) => {
  const body = JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', message: 'nodes "n1" not found', reason: 'NotFound', details: { name: 'n1', kind: 'nodes' }, code: 404 });
  const err = errorFromResponse(call, 404, body);
  t.is(err.status, 404);
  t.is(err.reason, 'NotFound');
  t.is(err.path, call);
  t.is(err.code, 'NOT_FOUND');
  t.is(err.message, `${call}: 404 NotFound: nodes "n1" not found`);
  t.is(err.apiStatus?.details?.name, 'n1');
  t.false(err.gone);
});

test('causes the message does not already carry are added, with their fields', (t) => {
  const status = {
    kind: 'Status' as const,
    code: 422,
    reason: 'Invalid',
    message: 'Node "x" is invalid: spec.podCIDRs: Invalid value',
    details: { causes: [{ field: 'spec.podCIDRs', message: 'Invalid value' }, { field: 'metadata.labels', message: 'name part must be 63 characters or less' }] },
  };
  const err = errorFromStatus('PUT https://h/api/v1/nodes/x', status);
  t.is(err.message, 'PUT https://h/api/v1/nodes/x: 422 Invalid: Node "x" is invalid: spec.podCIDRs: Invalid value; metadata.labels: name part must be 63 characters or less');
  t.is(err.code, 'INVALID_ARGUMENT');
});

test('the codes: each HTTP answer maps to the knit code a caller can act on', (t) => {
  const codeOf = (status: number, reason?: string) => errorFromStatus(call, { kind: 'Status', code: status, reason }).code;
  t.is(codeOf(409, 'AlreadyExists'), 'ALREADY_EXISTS');
  t.is(codeOf(409, 'Conflict'), 'FAILED_PRECONDITION');
  t.is(codeOf(403, 'Forbidden'), 'PERMISSION_DENIED');
  t.is(codeOf(401, 'Unauthorized'), 'PERMISSION_DENIED');
  t.is(codeOf(400, 'BadRequest'), 'INVALID_ARGUMENT');
  t.is(codeOf(429, 'TooManyRequests'), 'UNAVAILABLE');
  t.is(codeOf(500, 'InternalError'), 'UNAVAILABLE');
  t.is(codeOf(503, 'ServiceUnavailable'), 'UNAVAILABLE');
  t.is(codeOf(410, 'Gone'), 'FAILED_PRECONDITION');
});

test('410 Gone and the Expired reason both mean "relist"', (t) => {
  const fromEvent = errorFromStatus(call, { kind: 'Status', status: 'Failure', code: 410, reason: 'Expired', message: 'too old resource version: 5 (2083)' });
  t.true(fromEvent.gone);
  t.is(fromEvent.message, `${call}: 410 Expired: too old resource version: 5 (2083)`);
  t.true(errorFromResponse(call, 410, '{"kind":"Status","code":410,"reason":"Gone","message":"x"}').gone);
});

test('a body that is not a Status is quoted, cut short', (t) => {
  const html = '<html>' + 'x'.repeat(500) + '</html>';
  const err = errorFromResponse(call, 502, html);
  t.is(err.status, 502);
  t.is(err.reason, undefined);
  t.is(err.message, `${call}: HTTP 502: ${JSON.stringify(html.slice(0, 200))}… (513 characters)`);
  t.is(errorFromResponse(call, 401, '').message, `${call}: HTTP 401`);
  t.is(errorFromResponse(call, 500, '{"not":"a status"}').message, `${call}: HTTP 500: "{\\"not\\":\\"a status\\"}"`);
});

test('no answer at all: status 0, the socket error code as reason, UNAVAILABLE', (t) => {
  const cause = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6443'), { code: 'ECONNREFUSED' });
  const err = errorFromTransport(call, cause);
  t.is(err.status, 0);
  t.is(err.reason, 'ECONNREFUSED');
  t.is(err.code, 'UNAVAILABLE');
  t.is(err.message, `${call}: connect ECONNREFUSED 127.0.0.1:6443`);
  t.is(err.details.cause, cause);
  const cut = Object.assign(new Error('aborted'), { code: 'ECONNRESET' });
  t.is(errorFromTransport(`${call}?watch=true`, cut).message, `${call}?watch=true: aborted (ECONNRESET)`);
});
