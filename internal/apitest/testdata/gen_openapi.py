#!/usr/bin/env python3
# How api/openapi.yaml was first derived from OpenCode 1.18.33's document
# (/work/shared/spec/opencode-1.18.33-openapi.json): python3 gen_openapi.py ../../../api/openapi.yaml
# The YAML is the source of truth now; rerunning this overwrites hand edits.
"""One-shot generator of api/openapi.yaml from OpenCode 1.18.33's document.

Operations that exist in OpenCode's document are copied (parameters, request
bodies, success responses), their error responses are replaced with the
route family's shapes, and the component schemas they reference are copied
verbatim. Our own routes and extensions are added by hand below.
"""
import copy
import json
import sys

import yaml

SRC = '/work/shared/spec/opencode-1.18.33-openapi.json'
oc = json.load(open(SRC))
OCS = oc['components']['schemas']


def ref(name):
    return {'$ref': '#/components/schemas/' + name}


def rresp(name):
    return {'$ref': '#/components/responses/' + name}


def jcontent(schema):
    return {'application/json': {'schema': schema}}


# ---------------------------------------------------------------- components

extra_schemas = {}

# v1 family {name, data:{message, kind?}} shapes we send that OpenCode's
# document does not name.
def v1_error(name, desc, kind=False):
    data = {'type': 'object', 'properties': {'message': {'type': 'string'}},
            'required': ['message'], 'additionalProperties': False}
    if kind:
        data['properties']['kind'] = {'type': 'string', 'enum': ['Params', 'Headers', 'Query', 'Body', 'Payload']}
    return {'type': 'object', 'description': desc,
            'properties': {'name': {'type': 'string', 'enum': [name]}, 'data': data},
            'required': ['name', 'data'], 'additionalProperties': False}


def v2_error(tag, desc, extra=None):
    props = {'_tag': {'type': 'string', 'enum': [tag]}, 'message': {'type': 'string'}}
    props.update(extra or {})
    return {'type': 'object', 'description': desc, 'properties': props,
            'required': ['_tag', 'message'], 'additionalProperties': False}


extra_schemas['V1UnauthorizedError'] = v1_error(
    'UnauthorizedError', 'Extension: 401 of a v1 route when the server has a password and the request has no valid basic auth.')
extra_schemas['V1ConflictError'] = v1_error(
    'ConflictError', 'Extension: 409 of a v1 route, e.g. a messageID reused with different content or an inbox entry already delivered.')
extra_schemas['MessageRevokedError'] = v1_error(
    'MessageRevokedError', 'Extension: 409 of a blocking POST /session/{sessionID}/message whose input was revoked from the inbox before it was delivered.')
extra_schemas['V1ServiceUnavailableError'] = v1_error(
    'ServiceUnavailableError', 'Extension: 503 of a v1 route, e.g. while the server shuts down.')
extra_schemas['V1PayloadTooLargeError'] = v1_error(
    'PayloadTooLargeError', 'Extension: 413 of a v1 route whose request body exceeds 16 MiB.', kind=True)
extra_schemas['V1MethodNotAllowedError'] = v1_error(
    'MethodNotAllowedError', 'Extension: 405 for a known path with an unsupported method (v1 paths).')
extra_schemas['V1TooManyRequestsError'] = v1_error(
    'TooManyRequestsError', 'Extension: 429 of a v1 event stream when the client already holds the maximum number of streams.')
extra_schemas['V2TooManyRequestsError'] = v2_error(
    'TooManyRequestsError', 'Extension: 429 of an /api event stream when the client already holds the maximum number of streams.')
extra_schemas['V2NotFoundError'] = v2_error(
    'NotFoundError', 'Extension: 404 of an /api route for an unknown route or a resource other than a session or message.')
extra_schemas['V2PayloadTooLargeError'] = v2_error(
    'PayloadTooLargeError', 'Extension: 413 of an /api route whose request body exceeds 16 MiB.',
    {'kind': {'type': 'string'}})
extra_schemas['V2MethodNotAllowedError'] = v2_error(
    'MethodNotAllowedError', 'Extension: 405 for a known /api path with an unsupported method.')

extra_schemas['InboxInput'] = {
    'type': 'object',
    'description': 'Extension: an admitted input still pending in the session inbox (not yet delivered to the model).',
    'properties': {
        'id': {'type': 'string', 'pattern': '^msg'},
        'sessionID': {'type': 'string', 'pattern': '^ses'},
        'delivery': {'type': 'string', 'enum': ['steer', 'queue']},
        'prompt': ref('Prompt'),
        'admittedSeq': {'type': 'integer', 'minimum': 0},
        'timeCreated': {'type': 'number'},
        'parts': {'type': 'array', 'items': ref('Part'),
                  'description': 'The user message parts the input will be delivered as, with their prt_ IDs.'},
    },
    'required': ['id', 'sessionID', 'delivery', 'prompt', 'admittedSeq', 'timeCreated', 'parts'],
    'additionalProperties': False,
}

extra_schemas['InboxPatch'] = {
    'type': 'object',
    'description': 'Extension: change the delivery and/or replace the prompt of a pending input. At least one field is required.',
    'properties': {
        'delivery': {'type': 'string', 'enum': ['steer', 'queue']},
        'prompt': ref('PromptInput'),
    },
    'minProperties': 1,
    'additionalProperties': False,
}

extra_schemas['Delivery'] = {
    'type': 'string', 'enum': ['steer', 'queue'],
    'description': 'Extension on v1 prompts: how the input reaches a busy session. `steer` (default) injects it at the '
                   'next model-call boundary of the running turn, `queue` runs it as its own turn afterwards.',
}



def inbox_event(typ, desc, data_props, required):
    props = {'timestamp': {'type': 'number'}, 'sessionID': {'type': 'string', 'pattern': '^ses'},
             'messageID': {'type': 'string', 'pattern': '^msg_'},
             'delivery': {'type': 'string', 'enum': ['steer', 'queue']}}
    props.update(data_props)
    env = copy.deepcopy(OCS['SessionNextPromptAdmitted'])
    env['description'] = 'Extension: ' + desc
    env['properties']['type'] = {'type': 'string', 'enum': [typ]}
    env['properties']['data'] = {'type': 'object', 'properties': props,
                                 'required': ['timestamp', 'sessionID', 'messageID', 'delivery'] + required,
                                 'additionalProperties': False}
    return env


extra_schemas['SessionInboxEnqueued'] = inbox_event(
    'session.inbox.enqueued', 'an admitted input entered the session inbox.', {'prompt': ref('Prompt')}, ['prompt'])
extra_schemas['SessionInboxDelivered'] = inbox_event(
    'session.inbox.delivered', 'a pending input was delivered to the model (it left the inbox).', {}, [])
extra_schemas['SessionInboxCancelled'] = inbox_event(
    'session.inbox.cancelled', 'a pending input left the inbox undelivered: revoked by a client or dropped by an abort.',
    {'reason': {'type': 'string', 'enum': ['revoked', 'aborted']}}, ['reason'])
extra_schemas['SessionInboxDeliveryChanged'] = inbox_event(
    'session.inbox.delivery.changed', 'the delivery of a pending input changed.', {}, [])
extra_schemas['SessionInboxReplaced'] = inbox_event(
    'session.inbox.replaced', 'the prompt of a pending input was replaced.', {'prompt': ref('Prompt')}, ['prompt'])

responses = {}


def response(name, desc, schema):
    responses[name] = {'description': desc, 'content': jcontent(schema)}


# v1 family
response('V1BadRequest', 'BadRequest: the path, query or body is invalid. OpenCode\'s document lists Effect-style '
         'shapes here; the real server and this one answer with the legacy {name, data} family.', ref('BadRequestError'))
response('V1Unauthorized', 'UnauthorizedError (extension): the server has a password and the request carries no valid '
         'HTTP basic auth.', ref('V1UnauthorizedError'))
response('V1NotFound', 'NotFoundError: the session, message or request does not exist.', ref('NotFoundError'))
response('V1Conflict', 'ConflictError (extension): the request conflicts with the stored state.', ref('V1ConflictError'))
response('V1PromptConflict', 'ConflictError: a messageID reused with different content; MessageRevokedError '
         '(extension): the input was revoked from the inbox before it was delivered.',
         {'anyOf': [ref('V1ConflictError'), ref('MessageRevokedError')]})
response('V1PayloadTooLarge', 'PayloadTooLargeError (extension): the request body exceeds 16 MiB.', ref('V1PayloadTooLargeError'))
response('V1ServiceUnavailable', 'ServiceUnavailableError (extension): the server is shutting down.', ref('V1ServiceUnavailableError'))
response('V1InternalError', 'UnknownError: an unexpected server error (details only in the server log).', ref('UnknownError'))
response('V1MethodNotAllowed', 'MethodNotAllowedError (extension): the path exists but not with this method.', ref('V1MethodNotAllowedError'))
response('V1TooManyRequests', 'TooManyRequestsError (extension): the client already holds the maximum number of '
         'concurrent event streams.', ref('V1TooManyRequestsError'))
response('V1UnknownRoute', 'NotFoundError (extension): no route matches (the real server answers 200 HTML).', ref('NotFoundError'))
# v2 family
response('V2BadRequest', 'InvalidRequestError: the path, query or body is invalid.', ref('InvalidRequestError'))
response('V2BadRequestCursor', 'InvalidCursorError | InvalidRequestError: an invalid query or cursor.',
         {'anyOf': [ref('InvalidCursorError'), ref('InvalidRequestError')]})
response('V2Unauthorized', 'UnauthorizedError: the server has a password and the request carries no valid HTTP basic auth.',
         ref('UnauthorizedError'))
response('V2SessionNotFound', 'SessionNotFoundError: the session does not exist.', ref('SessionNotFoundError'))
response('V2MessageNotFound', 'MessageNotFoundError | SessionNotFoundError: the message or its session does not exist.',
         {'anyOf': [ref('MessageNotFoundError'), ref('SessionNotFoundError')]})
response('V2Conflict', 'ConflictError: the request conflicts with the stored state (an id reused with different '
         'content, an input already delivered or revoked).', ref('ConflictError'))
response('V2PayloadTooLarge', 'PayloadTooLargeError (extension): the request body exceeds 16 MiB.', ref('V2PayloadTooLargeError'))
response('V2ServiceUnavailable', 'ServiceUnavailableError: the server is shutting down.', ref('ServiceUnavailableError'))
response('V2InternalError', 'UnknownError: an unexpected server error (details only in the server log).', ref('UnknownError1'))
response('V2MethodNotAllowed', 'MethodNotAllowedError (extension): the path exists but not with this method.', ref('V2MethodNotAllowedError'))
response('V2TooManyRequests', 'TooManyRequestsError (extension): the client already holds the maximum number of '
         'concurrent event streams.', ref('V2TooManyRequestsError'))
response('V2UnknownRoute', 'NotFoundError (extension): no route matches.', ref('V2NotFoundError'))

# ---------------------------------------------------------------- operations

paths = {}

SSE = {'text/event-stream': {'schema': {'type': 'string'}}}


def errors(fam, codes, overrides=None):
    """The error responses of an operation: codes is a string of flags."""
    p = 'V1' if fam == 1 else 'V2'
    out = {}
    names = {'400': p + 'BadRequest', '401': p + 'Unauthorized', '413': p + 'PayloadTooLarge',
             '500': p + 'InternalError', '503': p + 'ServiceUnavailable',
             '404': 'V1NotFound' if fam == 1 else 'V2SessionNotFound',
             '409': p + 'Conflict', '429': p + 'TooManyRequests'}
    for c in codes:
        out[c] = rresp(names[c])
    out.update(overrides or {})
    return out


def add(path, method, op):
    paths.setdefault(path, {})[method] = op


def from_oc(oc_path, method, fam, codes, path=None, ok=None, drop_params=(), overrides=None, description=None,
            body=None):
    src = copy.deepcopy(oc['paths'][oc_path][method])
    op = {}
    for k in ('tags', 'operationId', 'summary', 'description', 'deprecated'):
        if k in src:
            op[k] = src[k]
    if description:
        op['description'] = src.get('description', '') + '\n\n' + description
    params = [p for p in src.get('parameters', []) if p['name'] not in drop_params]
    if params:
        op['parameters'] = params
    if body is not None:
        op['requestBody'] = body
    elif 'requestBody' in src:
        op['requestBody'] = src['requestBody']
    resp = {}
    for code, r in src['responses'].items():
        if code.startswith('2'):
            resp[code] = r
    if ok:
        resp.update(ok)
    for code, r in resp.items():
        if code.startswith('2') and 'content' in r and 'text/event-stream' in r['content']:
            r['content'] = copy.deepcopy(SSE)
    resp.update(errors(fam, codes, overrides))
    op['responses'] = dict(sorted(resp.items()))
    add(path or oc_path, method, op)
    return op


# ---- v1 (routes/session.go mountV1)
from_oc('/global/health', 'get', 1, ['401', '500'])
from_oc('/event', 'get', 1, ['401', '429', '500'], description=(
    'Frames are `data: {"id","type","properties"}` with no `id:` or `event:` line; `server.connected` first, '
    '`server.heartbeat` every 10 s.'))
from_oc('/global/event', 'get', 1, ['401', '429', '500'], description=(
    'Frames are `data: {"directory","payload":{"id","type","properties"}}`.'))
add('/doc', 'get', {
    'operationId': 'doc', 'tags': ['meta'], 'summary': 'OpenAPI document',
    'description': 'Extension: this document, as YAML.',
    'responses': {'200': {'description': 'The OpenAPI document', 'content': {'application/yaml': {'schema': {
        'type': 'object', 'required': ['openapi', 'info', 'paths']}}}},
        **errors(1, ['401', '500'])}})

from_oc('/session', 'post', 1, ['400', '401', '404', '413', '500', '503'])
from_oc('/session', 'get', 1, ['400', '401', '500', '503'])
from_oc('/session/status', 'get', 1, ['401', '500'])
from_oc('/session/{sessionID}', 'get', 1, ['400', '401', '404', '500', '503'])
from_oc('/session/{sessionID}', 'patch', 1, ['400', '401', '404', '413', '500', '503'])
from_oc('/session/{sessionID}', 'delete', 1, ['400', '401', '404', '500', '503'])
from_oc('/session/{sessionID}/children', 'get', 1, ['400', '401', '404', '500', '503'])
from_oc('/session/{sessionID}/message', 'get', 1, ['400', '401', '404', '500', '503'])
from_oc('/session/{sessionID}/message/{messageID}', 'get', 1, ['400', '401', '404', '500', '503'])

v1_prompt_desc = ('Extension: the optional `delivery` (steer|queue, default steer) says how the input reaches a busy '
                  'session; the input waits in the session inbox (GET /session/{sessionID}/inbox) until delivered.')
for p in ('/session/{sessionID}/message', '/session/{sessionID}/prompt_async'):
    body = copy.deepcopy(oc['paths'][p]['post']['requestBody'])
    body['content']['application/json']['schema']['properties']['delivery'] = ref('Delivery')
    body['required'] = True
    if p.endswith('/message'):
        ok = copy.deepcopy(oc['paths'][p]['post']['responses']['200'])
        ok['description'] = ('The last assistant message of the turn that answered the input, with its parts; with '
                             '`noReply` the stored user message (as the real server does; OpenCode\'s document '
                             'names only AssistantMessage).')
        ok['content']['application/json']['schema']['properties']['info'] = {
            'anyOf': [ref('AssistantMessage'), ref('UserMessage')]}
        from_oc(p, 'post', 1, ['400', '401', '404', '413', '500', '503'], body=body, ok={'200': ok},
                overrides={'409': rresp('V1PromptConflict')},
                description=v1_prompt_desc + ' The call blocks until the turn that answers this input ends; if the '
                'input is revoked from the inbox first it answers 409 MessageRevokedError.')
    else:
        from_oc(p, 'post', 1, ['400', '401', '404', '409', '413', '500', '503'], body=body,
                description=v1_prompt_desc)
from_oc('/session/{sessionID}/abort', 'post', 1, ['400', '401', '404', '500', '503'])
from_oc('/session/{sessionID}/todo', 'get', 1, ['400', '401', '404', '500', '503'])
from_oc('/session/{sessionID}/diff', 'get', 1, ['400', '401', '404', '500', '503'])

# ---- permissions (lifecycle/permission.go)
from_oc('/permission', 'get', 1, ['400', '401', '500'])
from_oc('/permission/{requestID}/reply', 'post', 1, ['400', '401', '404', '413', '500', '503'])
from_oc('/session/{sessionID}/permissions/{permissionID}', 'post', 1, ['400', '401', '404', '413', '500', '503'])

# ---- inbox (both families)
session_param = {'name': 'sessionID', 'in': 'path', 'required': True, 'schema': {'type': 'string', 'pattern': '^ses'}}
message_param = {'name': 'messageID', 'in': 'path', 'required': True, 'schema': {'type': 'string', 'pattern': '^msg'}}
for fam, prefix in ((1, ''), (2, '/api')):
    tag = 'inbox'
    nf = rresp('V1NotFound' if fam == 1 else 'V2SessionNotFound')
    nfm = rresp('V1NotFound' if fam == 1 else 'V2MessageNotFound')
    opid = ('v2.' if fam == 2 else '') + 'session.inbox'
    add(prefix + '/session/{sessionID}/inbox', 'get', {
        'tags': [tag], 'operationId': opid + '.list', 'summary': 'List pending inputs',
        'description': 'Extension: the admitted inputs of the session not yet delivered to the model, in admission order.',
        'parameters': [session_param],
        'responses': {'200': {'description': 'Pending inputs', 'content': jcontent({
            'type': 'object', 'properties': {'data': {'type': 'array', 'items': ref('InboxInput')}},
            'required': ['data'], 'additionalProperties': False})},
            **errors(fam, ['400', '401', '500', '503'], {'404': nf})}})
    add(prefix + '/session/{sessionID}/inbox/{messageID}', 'delete', {
        'tags': [tag], 'operationId': opid + '.revoke', 'summary': 'Revoke a pending input',
        'description': 'Extension: withdraw a pending input before it is delivered. `revoked` is false when it was '
                       'already revoked. A blocking POST waiting for it answers 409.',
        'parameters': [session_param, message_param],
        'responses': {'200': {'description': 'Revoked', 'content': jcontent({
            'type': 'object', 'properties': {'revoked': {'type': 'boolean'}},
            'required': ['revoked'], 'additionalProperties': False})},
            **errors(fam, ['400', '401', '409', '500', '503'], {'404': nfm})}})
    add(prefix + '/session/{sessionID}/inbox/{messageID}', 'patch', {
        'tags': [tag], 'operationId': opid + '.update', 'summary': 'Change a pending input',
        'description': 'Extension: change the delivery of a pending input and/or replace its prompt (new part IDs).',
        'parameters': [session_param, message_param],
        'requestBody': {'required': True, 'content': jcontent(ref('InboxPatch'))},
        'responses': {'200': {'description': 'The updated input', 'content': jcontent({
            'type': 'object', 'properties': {'data': ref('InboxInput')},
            'required': ['data'], 'additionalProperties': False})},
            **errors(fam, ['400', '401', '409', '413', '500', '503'], {'404': nfm})}})

# ---- v2 (routes/v2.go mountV2)
from_oc('/api/session', 'post', 2, ['400', '401', '409', '413', '500', '503'])
from_oc('/api/session', 'get', 2, ['401', '500', '503'], overrides={'400': rresp('V2BadRequestCursor')})
from_oc('/api/session/active', 'get', 2, ['401', '500'])
from_oc('/api/event', 'get', 2, ['401', '429', '500'], description=(
    'Frames are `data: {"id","type","durable"?,"data"}`; the first frame is `server.connected` in the /event shape.'))
from_oc('/api/session/{sessionID}', 'get', 2, ['400', '401', '404', '500', '503'])
from_oc('/api/session/{sessionID}/prompt', 'post', 2, ['400', '401', '404', '409', '413', '500', '503'])
from_oc('/api/session/{sessionID}/interrupt', 'post', 2, ['400', '401', '404', '500', '503'])
from_oc('/api/session/{sessionID}/wait', 'post', 2, ['400', '401', '404', '500', '503'], description=(
    'Extension: answers 204 once the session is idle (the real 1.18.33 server answers 503).'))
from_oc('/api/session/{sessionID}/message', 'get', 2, ['401', '404', '500', '503'],
        overrides={'400': rresp('V2BadRequestCursor')})
from_oc('/api/session/{sessionID}/message/{messageID}', 'get', 2, ['400', '401', '500', '503'],
        overrides={'404': rresp('V2MessageNotFound')})
from_oc('/api/session/{sessionID}/history', 'get', 2, ['400', '401', '404', '500', '503'])
ev = from_oc('/api/session/{sessionID}/event', 'get', 2, ['400', '401', '404', '429', '500', '503'], description=(
    'Frames are `id: <seq>` then `data: {"id","type","durable":{"aggregateID","seq","version"},"data"}`. '
    'Extension: the `id:` line carries the durable sequence so an EventSource resumes by itself via '
    'Last-Event-ID (accepted like `after`); OpenCode\'s clients ignore it.'))
ev['parameters'].append({'name': 'Last-Event-ID', 'in': 'header', 'required': False, 'schema': {'type': 'string'},
                         'description': 'Extension: the resume cursor an EventSource sends; `after` wins when both are set.'})

# ---- catalog (routes/catalog.go mountCatalog)
for p in ('/config', '/config/providers', '/provider', '/agent', '/path', '/project/current', '/vcs',
          '/experimental/capabilities', '/experimental/console', '/command', '/lsp', '/formatter',
          '/experimental/workspace', '/experimental/workspace/status', '/question', '/find/file',
          '/find/symbol', '/mcp', '/experimental/resource', '/provider/auth'):
    from_oc(p, 'get', 1, ['400', '401', '500'])
from_oc('/project/{projectID}/directories', 'get', 1, ['400', '401', '500'], path='/project/global/directories',
        drop_params=('projectID',), description='This server has the one project `global`.')
for p in ('/api/location', '/api/agent', '/api/integration', '/api/reference', '/api/command', '/api/skill'):
    from_oc(p, 'get', 2, ['400', '401', '500'])
for p in ('/api/provider', '/api/model'):
    from_oc(p, 'get', 2, ['400', '401', '500', '503'])

# ---------------------------------------------------------------- closure


def refs(node, out):
    if isinstance(node, dict):
        r = node.get('$ref')
        if isinstance(r, str) and r.startswith('#/components/schemas/'):
            out.add(r.split('/')[-1])
        for v in node.values():
            refs(v, out)
    elif isinstance(node, list):
        for v in node:
            refs(v, out)


schemas = {}
todo = set()
refs(paths, todo)
refs(responses, todo)
refs(extra_schemas, todo)
while todo:
    n = todo.pop()
    if n in schemas or n in extra_schemas:
        continue
    if n not in OCS:
        sys.exit('missing schema ' + n)
    schemas[n] = copy.deepcopy(OCS[n])
    refs(schemas[n], todo)
schemas.update(extra_schemas)

# Our durable log also carries the inbox events.
sde = schemas['SessionDurableEvent']
sde['description'] = ('A durable event of the session log. Extension: besides OpenCode\'s session.next.* events, '
                      'the log carries the session.inbox.* events of the inbox routes.')
for n in ('SessionInboxEnqueued', 'SessionInboxDelivered', 'SessionInboxCancelled', 'SessionInboxDeliveryChanged',
          'SessionInboxReplaced'):
    sde['oneOf'].append(ref(n))

# The real server answers `"cursor":{"previous":null,"next":null}` on a list
# with no other page (traces/e1-abort.http.txt), which OpenCode's own schema
# does not allow: accept null as well.
for n in ('SessionsResponse', 'SessionMessagesResponse'):
    cur = schemas[n]['properties']['cursor']
    cur['description'] = ('Opaque page cursors. Like the real server, null (or absent) when there is no such page '
                          '(OpenCode\'s document says string only).')
    for k in ('previous', 'next'):
        cur['properties'][k] = {'anyOf': [{'type': 'string'}, {'type': 'null'}]}

doc = {
    'openapi': '3.1.0',
    'info': {
        'title': 'opencode-server',
        'version': '1.18.33',
        'description': (
            'The HTTP+SSE API of opencode-server, compatible with OpenCode 1.18.33. Operations that OpenCode has '
            'copy its request and success schemas; error responses are the ones this server sends, in the route '
            "family's shape: v1 routes `{name, data:{message, kind?}}`, /api routes `{_tag, message, ...}`. "
            'Every route may answer 401 when the server has a password, 500 on an unexpected error; an unknown '
            'route answers 404 and a known path with another method 405, in the family of the path '
            '(components.responses V1UnknownRoute, V2UnknownRoute, V1MethodNotAllowed, V2MethodNotAllowed). '
            'A CORS preflight (OPTIONS with Access-Control-Request-Method from an allowed origin) answers 204 on any '
            'path. Extensions are marked "Extension" in descriptions.'),
    },
    'security': [{}, {'basicAuth': []}],
    'paths': dict(sorted(paths.items())),
    'components': {
        'schemas': dict(sorted(schemas.items())),
        'responses': dict(sorted(responses.items())),
        'securitySchemes': {'basicAuth': {'type': 'http', 'scheme': 'basic',
                                          'description': 'Required when the server has a password; user `opencode` unless configured.'}},
    },
}


class Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data):
        return True


def str_representer(dumper, data):
    if '\n' in data:
        return dumper.represent_scalar('tag:yaml.org,2002:str', data, style='|')
    return dumper.represent_scalar('tag:yaml.org,2002:str', data)


Dumper.add_representer(str, str_representer)


out = yaml.dump(doc, Dumper=Dumper, sort_keys=False, allow_unicode=True, width=120)
open(sys.argv[1], 'w').write('# The contract of every route: served at GET /doc and checked against every response in tests\n'
                             '# (internal/apitest). Request and success schemas copy OpenCode 1.18.33\'s document.\n' + out)
print(len(paths), 'paths', sum(len(v) for v in paths.values()), 'operations', len(schemas), 'schemas')
