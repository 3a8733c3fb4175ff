// A real OAuth 2.1 / OpenID authorization server for Toolwire's resource-server tests: the npm
// package oidc-provider (version pinned by package-lock.json here), on 127.0.0.1.
//
// TEST HARNESS ONLY. Its /__test/ endpoints are unauthenticated and mint tokens with its signing
// keys, its clients' secrets are in this file, and it keeps everything in memory. Never run it
// anywhere but on loopback for tests.
//
// Run: `scripts/oidc start [PORT]`, or NODE SCRIPT [PORT] with the two lines of `scripts/oidc path`.
//   PORT 0 (the default) takes a free port. When ready it prints ONE JSON line on stdout and
//   nothing else there, e.g.
//   {"issuer":"http://127.0.0.1:PORT","jwks_uri":".../jwks","token_endpoint":".../token",
//    "authorization_endpoint":".../auth","introspection_endpoint":".../token/introspection",
//    "revocation_endpoint":".../token/revocation","registration_endpoint":".../reg",
//    "discovery":".../.well-known/openid-configuration","kid":"<current RS256 kid>",
//    "es256_kid":"<current ES256 kid>","pid":N}
//   Logs go to stderr. It stops on SIGTERM/SIGINT, and with --watch-stdin also when its stdin
//   closes: a test spawns `NODE SCRIPT 0 --watch-stdin` with a piped stdin it never writes to,
//   reads the first stdout line, and the provider goes when the test process does.
//
// The issuer is exactly http://127.0.0.1:PORT (no trailing slash). Discovery: oidc-provider serves
// the same metadata at /.well-known/openid-configuration and (RFC 8414) at
// /.well-known/oauth-authorization-server; OIDC_RFC8414=0 makes the latter a 404, for clients'
// fallback tests.
//
// Clients (all application_type native, so an http://127.0.0.1:ANY_PORT/callback redirect matches):
//   rs-test     / rs-secret      confidential (client_secret_basic; client_secret_post is accepted
//                                too); client_credentials, authorization_code, refresh_token;
//                                any scope
//   rs-test-2   / rs-secret-2    the same, a second principal, but without the `admin` scope
//                                (asking for it is invalid_scope)
//   rs-public                    public (token_endpoint_auth_method none); authorization_code,
//                                refresh_token
//   rs-introspect / rs-introspect-secret  for the resource server itself: no grants, only
//                                introspection (opaque tokens) and revocation
//   gateway-exchanger / gateway-exchanger-secret  a gateway: client_credentials (for its own
//                                requests) and RFC 8693 token exchange (below), nothing else
// Dynamic client registration (RFC 7591) is open at /reg.
//
// Scopes: openid offline_access tools:read tools:write math admin. Resource indicators (RFC 8707):
// any `resource` is accepted; by default its tokens are JWTs (RFC 9068, typ at+jwt, RS256) with
// aud = the resource, and only the scopes `tools:read tools:write math admin` are granted for it
// (others asked for are dropped silently). Without a `resource` a token is opaque (for userinfo).
// One resource (one aud) per token request. PKCE (S256) is required for every authorization code.
// Refresh tokens are issued to every client allowed the refresh_token grant (offline_access not
// needed).
//
// Authorization code flow without a person: the login and consent pages are replaced by
// GET /__test/interaction/UID, which approves at once as the account `login_hint` (default
// `alice`; `deny` gives error=access_denied), granting the requested scopes allowed for the
// resource. So: GET ISSUER/auth?client_id=rs-test&response_type=code&redirect_uri=
// http://127.0.0.1:PORT/callback&scope=math%20tools:read&resource=RS_URI&code_challenge=C&
// code_challenge_method=S256&state=S, then follow each 303 Location with a cookie jar (4 hops:
// interaction, /auth/UID, interaction, /auth/UID) until one points at the redirect_uri; its query
// has code, state and iss. Then POST ISSUER/token grant_type=authorization_code, code,
// redirect_uri, code_verifier, resource (and client auth; rs-public sends client_id only).
//
// RFC 8693 token exchange (grant_type urn:ietf:params:oauth:grant-type:token-exchange), through
// oidc-provider's custom grant API (registerGrantType; oidc-provider ships no RFC 8693 grant),
// for the clients allowed the grant (gateway-exchanger): subject_token an access token this
// provider issued that is still active (a JWT: signed with one of its keys, its iss, and its
// jti one this provider's token endpoint issued and not expired, so one from /__test/mint is
// refused; an opaque one: stored and valid, so a revoked one is refused), subject_token_type ...:token-type:access_token, one `resource` (required; refused
// with invalid_target where /__test/resource says "reject": true or "exchange": false), an
// optional `scope` (the scopes granted are those asked for, or the subject's, that the subject
// token has and the resource allows), `audience` (if given, it must equal the resource's
// audience). It issues a JWT access token (RS256, typ at+jwt) with the subject token's `sub`,
// aud the resource's audience, client_id the exchanging client, and `act: {"sub": CLIENT}`
// (RFC 8693 section 4.1; a subject token's own `act` is nested inside), lifetime the resource's
// access-token TTL but no longer than the subject token's; the answer has issued_token_type
// ...:token-type:access_token. Exchanges issued and refused are counted in /__test/state.
//
// Test endpoints (JSON in, JSON out):
//   POST /__test/rotate   {"keep_old": true}  new RS256 and ES256 signing keys (new kids); tokens
//                         are signed with them from now on. The previous keys stay in the JWKS
//                         (published, no longer used to sign) unless "keep_old": false.
//                         Returns {"kid", "es256_kid", "previous_kids", "jwks"}.
//   POST /__test/mint     {"claims": {...}, "header": {...}, "ttl": N, "defaults": true,
//                          "foreign_key": false, "hs_secret": "..."}
//                         A JWT signed with the CURRENT signing key for header.alg (default
//                         RS256; ES256, RS384/512 and PS256/384/512 too; HS256 is keyed with
//                         hs_secret, default the current RSA public key's PEM (the alg-confusion
//                         attack); "none" gives an empty signature). Default header {alg: RS256,
//                         typ: at+jwt, kid: the current kid of that key type (none for HS*/none)};
//                         default claims {iss: issuer, sub: rs-test, client_id: rs-test, iat: now,
//                         exp: now + ttl (default OIDC_TOKEN_TTL), jti: a UUID}; the
//                         given header and claims override them, a null value removes one, and
//                         "defaults": false starts from no claims. "foreign_key": true signs with
//                         a throwaway key that is in no JWKS (the kid still says the current one).
//                         Returns {"token", "header", "claims"}.
//   POST /__test/resource {"resource": URI, "scope": "...", "format": "jwt"|"opaque", "ttl": N,
//                          "alg": "RS256"|"ES256", "audience": "...", "reject": false}
//                         per-resource settings instead of the defaults above ("reject": true makes
//                         asking for it invalid_target; {"resource": URI, "reset": true} forgets).
//   GET  /__test/state    current kids, the JWKS, the per-resource settings, and
//                         token_exchanges {"issued": N, "refused": N}.
//
// Environment: OIDC_TOKEN_TTL access-token lifetime in seconds (default 300), OIDC_DEBUG=1 logs
// every request to stderr, OIDC_RFC8414=0 (above). OIDC_INTERACTIONS=pages keeps oidc-provider's
// own HTML pages instead of the at-once approval: /interaction/UID shows a login form (POST
// prompt=login, login=ANY, password=ANY; the login becomes the account), then a consent form
// (POST prompt=consent) listing the scopes asked for; each answers 303 back to /auth/UID. A
// test drives them as a browser does: GET, read the form, POST it with the cookies.

import * as crypto from 'node:crypto';
import * as http from 'node:http';

import Provider, { errors } from 'oidc-provider';

// stdout carries the one ready line only: oidc-provider prints its notices with console.info.
for (const level of ['log', 'info', 'debug']) {
  console[level] = (...args) => console.error(...args);
}

const argv = process.argv.slice(2);
const watchStdin = argv.includes('--watch-stdin');
const positional = argv.filter((a) => !a.startsWith('--'));
const port = Number(positional[0] ?? 0);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`provider.mjs: bad port ${positional[0]}`);
  process.exit(2);
}
const TTL = Number(process.env.OIDC_TOKEN_TTL ?? 300);
if (!Number.isInteger(TTL) || TTL <= 0) {
  console.error(`provider.mjs: bad OIDC_TOKEN_TTL ${process.env.OIDC_TOKEN_TTL}`);
  process.exit(2);
}
const DEBUG = process.env.OIDC_DEBUG === '1';
const RFC8414 = process.env.OIDC_RFC8414 !== '0';
const PAGES = process.env.OIDC_INTERACTIONS === 'pages';
const RS_SCOPE = 'tools:read tools:write math admin';
const SCOPES = ['openid', 'offline_access', ...RS_SCOPE.split(' ')];

// --- keys ---------------------------------------------------------------------------------------

// RFC 7638 thumbprint, used as the kid.
function thumbprint(jwk) {
  const members = jwk.kty === 'RSA'
    ? { e: jwk.e, kty: jwk.kty, n: jwk.n }
    : { crv: jwk.crv, kty: jwk.kty, x: jwk.x, y: jwk.y };
  return crypto.hash('sha256', JSON.stringify(members), 'base64url');
}

function generateKey(alg) {
  const { privateKey } = alg === 'ES256'
    ? crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' })
    : crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = privateKey.export({ format: 'jwk' });
  return { ...jwk, kid: thumbprint(jwk), alg, use: 'sig' };
}

function publicJwk(jwk) {
  const { d, p, q, dp, dq, qi, ...pub } = jwk;
  return pub;
}

// The signing keys: current (used to sign) and retired (still published).
const keys = {
  rsa: generateKey('RS256'),
  ec: generateKey('ES256'),
  retired: [],
};

// Current keys first: oidc-provider signs with the first key that fits the alg.
function privateJwks() {
  return { keys: [keys.rsa, keys.ec, ...keys.retired] };
}

function publishedJwks() {
  return { keys: privateJwks().keys.map(publicJwk) };
}

// --- provider -----------------------------------------------------------------------------------

const resources = new Map(); // URI -> per-resource settings (POST /__test/resource)

async function getResourceServerInfo(_ctx, resource) {
  const s = resources.get(resource) ?? {};
  if (s.reject) throw new errors.InvalidTarget();
  return {
    scope: s.scope ?? RS_SCOPE,
    audience: s.audience ?? resource,
    accessTokenTTL: s.ttl ?? TTL,
    accessTokenFormat: s.format ?? 'jwt',
    ...((s.format ?? 'jwt') === 'jwt' ? { jwt: { sign: { alg: s.alg ?? 'RS256' } } } : {}),
  };
}

const cookieKeys = [crypto.randomBytes(32).toString('base64url')];
const nativeLoopback = { application_type: 'native', redirect_uris: ['http://127.0.0.1/callback'] };

function configuration() {
  return {
    clients: [
      {
        client_id: 'rs-test',
        client_secret: 'rs-secret',
        token_endpoint_auth_method: 'client_secret_basic',
        grant_types: ['client_credentials', 'authorization_code', 'refresh_token'],
        response_types: ['code'],
        ...nativeLoopback,
      },
      {
        client_id: 'rs-test-2',
        client_secret: 'rs-secret-2',
        token_endpoint_auth_method: 'client_secret_basic',
        grant_types: ['client_credentials', 'authorization_code', 'refresh_token'],
        response_types: ['code'],
        scope: 'openid offline_access tools:read tools:write math',
        ...nativeLoopback,
      },
      {
        client_id: 'rs-public',
        token_endpoint_auth_method: 'none',
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        ...nativeLoopback,
      },
      {
        client_id: 'gateway-exchanger',
        client_secret: 'gateway-exchanger-secret',
        token_endpoint_auth_method: 'client_secret_basic',
        grant_types: ['client_credentials', EXCHANGE_GRANT],
        response_types: [],
        redirect_uris: [],
      },
      {
        client_id: 'rs-introspect',
        client_secret: 'rs-introspect-secret',
        token_endpoint_auth_method: 'client_secret_basic',
        grant_types: [],
        response_types: [],
        redirect_uris: [],
      },
    ],
    jwks: privateJwks(),
    cookies: { keys: cookieKeys },
    scopes: SCOPES,
    responseTypes: ['code'], // OAuth 2.1: no implicit or hybrid
    pkce: { required: () => true },
    features: {
      devInteractions: { enabled: PAGES },
      clientCredentials: { enabled: true },
      introspection: { enabled: true },
      revocation: { enabled: true },
      registration: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: async (_ctx, _client, oneOf) => oneOf,
        useGrantedResource: async () => true,
        getResourceServerInfo,
      },
    },
    ttl: {
      AccessToken: (_ctx, token) => token.resourceServer?.accessTokenTTL ?? TTL,
      ClientCredentials: (_ctx, token) => token.resourceServer?.accessTokenTTL ?? TTL,
      AuthorizationCode: 60,
      Grant: 3600,
      IdToken: 3600,
      Interaction: 600,
      RefreshToken: 86400,
      Session: 3600,
    },
    issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
    ...(PAGES ? {} : {
      interactions: { url: (_ctx, interaction) => `/__test/interaction/${interaction.uid}` },
    }),
    renderError: async (ctx, out) => {
      ctx.type = 'json';
      ctx.body = out;
    },
  };
}

// A rotation builds a new Provider (the keystore is fixed at construction) with the new keys
// first, so they are the ones selected to sign. Grants, sessions and tokens live in
// oidc-provider's in-memory adapter, which is shared by every Provider in this process, and the
// cookie keys stay the same, so nothing issued before a rotation is lost.
let provider;
let issuer;
function buildProvider() {
  const p = new Provider(issuer, configuration());
  p.on('server_error', (_ctx, err) => console.error('provider.mjs: server_error', err));
  for (const event of ['grant.error', 'authorization.error', 'introspection.error',
    'revocation.error', 'registration_create.error']) {
    p.on(event, (_ctx, err) => {
      if (DEBUG) console.error(`provider.mjs: ${event}: ${err.error ?? ''} ${err.error_description ?? err.message}`);
    });
  }
  // JWT access tokens are not stored by oidc-provider: the exchange knows them by their jti.
  for (const kind of ['access_token', 'client_credentials']) {
    p.on(`${kind}.issued`, (token) => {
      issuedJwts.set(token.jti, { sub: token.accountId ?? token.clientId, scope: token.scope ?? '' });
    });
  }
  p.registerGrantType(EXCHANGE_GRANT, (ctx) => tokenExchange(ctx).catch((err) => {
    exchanges.refused += 1;
    throw err;
  }), ['subject_token', 'subject_token_type', 'requested_token_type', 'resource', 'audience', 'scope']);
  provider = p;
  handler = p.callback();
}
let handler;

// --- RFC 8693 token exchange --------------------------------------------------------------------

const EXCHANGE_GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
const exchanges = { issued: 0, refused: 0 };
const issuedJwts = new Map(); // jti -> {sub, scope} of each JWT access token issued

const grantError = (error, description) => new errors.CustomOIDCProviderError(error, description);

// The claims of a JWT signed with one of this provider's keys (current or retired) and naming it
// as the issuer, or undefined.
function ownJwtClaims(token) {
  const [h, p, sig] = token.split('.');
  try {
    const header = JSON.parse(Buffer.from(h, 'base64url'));
    const claims = JSON.parse(Buffer.from(p, 'base64url'));
    const jwk = privateJwks().keys.find((k) => k.kid === header.kid && k.alg === header.alg);
    if (!jwk || !['RS256', 'ES256'].includes(header.alg)) return undefined;
    const key = crypto.createPublicKey({ key: publicJwk(jwk), format: 'jwk' });
    const data = Buffer.from(`${h}.${p}`);
    const signature = Buffer.from(sig, 'base64url');
    const ok = header.alg === 'ES256'
      ? crypto.verify('sha256', data, { key, dsaEncoding: 'ieee-p1363' }, signature)
      : crypto.verify('sha256', data, key, signature);
    return ok && claims.iss === issuer ? claims : undefined;
  } catch {
    return undefined;
  }
}

// Who an active access token (or client-credentials token) of this provider is for, or
// undefined: a JWT must carry its signature and the jti of one the token endpoint issued (so
// one minted by /__test/mint is not), an opaque one must be stored (so a revoked one is not).
async function activeSubject(token) {
  const now = Math.floor(Date.now() / 1000);
  if (token.split('.').length === 3) {
    const claims = ownJwtClaims(token);
    const issued = claims && issuedJwts.get(claims.jti);
    if (!issued || claims.sub !== issued.sub || !(claims.exp > now)) return undefined;
    return { ...issued, exp: claims.exp, act: claims.act };
  }
  for (const Model of [provider.AccessToken, provider.ClientCredentials]) {
    const found = await Model.find(token);
    if (found && found.isValid) {
      return { sub: found.accountId ?? found.clientId, scope: found.scope ?? '', exp: found.exp };
    }
  }
  return undefined;
}

async function tokenExchange(ctx) {
  const { params, client } = ctx.oidc;
  if (params.subject_token_type !== ACCESS_TOKEN_TYPE) {
    throw grantError('invalid_request', 'subject_token_type must be the access_token type');
  }
  if (params.requested_token_type && params.requested_token_type !== ACCESS_TOKEN_TYPE) {
    throw grantError('invalid_request', 'only access tokens are issued');
  }
  if (typeof params.subject_token !== 'string' || !params.subject_token) {
    throw grantError('invalid_request', 'subject_token is required');
  }
  const subject = await activeSubject(params.subject_token);
  if (!subject) {
    throw grantError('invalid_grant', 'the subject_token is not an active access token of this server');
  }
  if (typeof params.resource !== 'string' || !params.resource) {
    throw grantError('invalid_target', 'one resource is required');
  }
  if (resources.get(params.resource)?.exchange === false) {
    throw grantError('invalid_target', 'this client may not have tokens for that resource');
  }
  const info = await getResourceServerInfo(ctx, params.resource);
  if (params.audience && params.audience !== info.audience) {
    throw grantError('invalid_target', 'the audience is not the resource');
  }
  const had = new Set(subject.scope.split(' ').filter(Boolean));
  const allowed = new Set(info.scope.split(' '));
  const asked = params.scope ? params.scope.split(' ') : [...had];
  const scope = asked.filter((s) => had.has(s) && allowed.has(s)).join(' ');
  const now = Math.floor(Date.now() / 1000);
  const expiresIn = Math.max(1, Math.min(info.accessTokenTTL, subject.exp - now));
  const act = subject.act ? { sub: client.clientId, act: subject.act } : { sub: client.clientId };
  const { token } = mint({
    defaults: false,
    claims: {
      iss: issuer,
      sub: subject.sub,
      aud: info.audience,
      client_id: client.clientId,
      ...(scope ? { scope } : {}),
      act,
      iat: now,
      exp: now + expiresIn,
      jti: crypto.randomUUID(),
    },
  });
  exchanges.issued += 1;
  ctx.body = {
    access_token: token,
    issued_token_type: ACCESS_TOKEN_TYPE,
    token_type: 'Bearer',
    expires_in: expiresIn,
    ...(scope ? { scope } : {}),
  };
}

// --- /__test/ -----------------------------------------------------------------------------------

const B64 = (obj) => Buffer.from(JSON.stringify(obj)).toString('base64url');

function sign(alg, input, body) {
  const data = Buffer.from(input);
  if (alg === 'none') return '';
  if (/^HS(256|384|512)$/.test(alg)) {
    const secret = body.hs_secret
      ?? crypto.createPublicKey({ key: publicJwk(keys.rsa), format: 'jwk' }).export({ type: 'spki', format: 'pem' });
    return crypto.createHmac(`sha${alg.slice(2)}`, secret).update(data).digest('base64url');
  }
  const hash = `sha${alg.slice(2)}`;
  if (/^(RS|PS)(256|384|512)$/.test(alg)) {
    const jwk = body.foreign_key ? generateKey('RS256') : keys.rsa;
    const key = crypto.createPrivateKey({ key: jwk, format: 'jwk' });
    const opts = alg.startsWith('PS')
      ? { key, padding: crypto.constants.RSA_PKCS1_PSS_PADDING, saltLength: Number(alg.slice(2)) / 8 }
      : key;
    return crypto.sign(hash, data, opts).toString('base64url');
  }
  if (alg === 'ES256') {
    const jwk = body.foreign_key ? generateKey('ES256') : keys.ec;
    const key = crypto.createPrivateKey({ key: jwk, format: 'jwk' });
    return crypto.sign('sha256', data, { key, dsaEncoding: 'ieee-p1363' }).toString('base64url');
  }
  throw new HttpError(400, `cannot sign with alg ${alg} (RS*, PS*, ES256, HS*, none)`);
}

function withoutNulls(obj) {
  return Object.fromEntries(Object.entries(obj).filter(([, v]) => v !== null));
}

function mint(body) {
  const now = Math.floor(Date.now() / 1000);
  const ttl = body.ttl ?? TTL;
  const defaults = body.defaults === false ? {} : {
    iss: issuer,
    sub: 'rs-test',
    client_id: 'rs-test',
    iat: now,
    exp: now + ttl,
    jti: crypto.randomUUID(),
  };
  const claims = withoutNulls({ ...defaults, ...(body.claims ?? {}) });
  const alg = body.header?.alg ?? 'RS256';
  const kid = alg === 'ES256' ? keys.ec.kid : alg.startsWith('RS') || alg.startsWith('PS') ? keys.rsa.kid : undefined;
  const header = withoutNulls({ alg, typ: 'at+jwt', ...(kid ? { kid } : {}), ...(body.header ?? {}) });
  const input = `${B64(header)}.${B64(claims)}`;
  return { token: `${input}.${sign(alg, input, body)}`, header, claims };
}

function rotate(body) {
  const previous = [keys.rsa, keys.ec];
  keys.rsa = generateKey('RS256');
  keys.ec = generateKey('ES256');
  keys.retired = body.keep_old === false ? [] : [...previous, ...keys.retired];
  buildProvider();
  return {
    kid: keys.rsa.kid,
    es256_kid: keys.ec.kid,
    previous_kids: previous.map((k) => k.kid),
    jwks: publishedJwks(),
  };
}

function setResource(body) {
  if (typeof body.resource !== 'string') throw new HttpError(400, 'resource (a string) is required');
  if (body.reset) {
    resources.delete(body.resource);
  } else {
    if (body.format !== undefined && !['jwt', 'opaque'].includes(body.format)) {
      throw new HttpError(400, 'format is jwt or opaque');
    }
    const { resource, ...settings } = body;
    resources.set(resource, settings);
  }
  return { resource: body.resource, settings: resources.get(body.resource) ?? null };
}

// Approves an interaction at once: login as login_hint (default alice), then consent to what the
// prompt says is missing. oidc-provider redirects back here for each prompt in turn.
async function interaction(req, res) {
  const details = await provider.interactionDetails(req, res);
  const { prompt: { name, details: missing }, params, session, grantId } = details;
  if (params.login_hint === 'deny') {
    return provider.interactionFinished(req, res, {
      error: 'access_denied', error_description: 'denied by login_hint=deny',
    }, { mergeWithLastSubmission: false });
  }
  if (name === 'login') {
    return provider.interactionFinished(req, res, {
      login: { accountId: params.login_hint || 'alice' },
    }, { mergeWithLastSubmission: false });
  }
  if (name !== 'consent') throw new HttpError(501, `prompt ${name} not handled`);
  const grant = grantId
    ? await provider.Grant.find(grantId)
    : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
  if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
  if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
  for (const [indicator, scope] of Object.entries(missing.missingResourceScopes ?? {})) {
    grant.addResourceScope(indicator, scope.join(' '));
  }
  return provider.interactionFinished(req, res, { consent: { grantId: await grant.save() } }, {
    mergeWithLastSubmission: true,
  });
}

class HttpError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function readJson(req) {
  const chunks = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > 1 << 20) throw new HttpError(413, 'body too large');
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8').trim();
  if (!text) return {};
  try {
    const body = JSON.parse(text);
    if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new Error('not an object');
    return body;
  } catch (err) {
    throw new HttpError(400, `body is not a JSON object: ${err.message}`);
  }
}

function sendJson(res, status, body) {
  const text = `${JSON.stringify(body)}\n`;
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  res.end(text);
}

async function testRoute(req, res, path) {
  const post = req.method === 'POST';
  if (req.method === 'GET' && path.startsWith('/__test/interaction/')) return interaction(req, res);
  if (post && path === '/__test/rotate') return sendJson(res, 200, rotate(await readJson(req)));
  if (post && path === '/__test/mint') return sendJson(res, 200, mint(await readJson(req)));
  if (post && path === '/__test/resource') return sendJson(res, 200, setResource(await readJson(req)));
  if (req.method === 'GET' && path === '/__test/state') {
    return sendJson(res, 200, {
      issuer,
      kid: keys.rsa.kid,
      es256_kid: keys.ec.kid,
      retired_kids: keys.retired.map((k) => k.kid),
      jwks: publishedJwks(),
      resources: Object.fromEntries(resources),
      token_ttl: TTL,
      token_exchanges: exchanges,
    });
  }
  throw new HttpError(404, `no test endpoint ${req.method} ${path}`);
}

// --- server -------------------------------------------------------------------------------------

const server = http.createServer((req, res) => {
  const path = req.url.split('?')[0];
  if (DEBUG) {
    res.on('finish', () => console.error(`provider.mjs: ${req.method} ${req.url} -> ${res.statusCode}`));
  }
  if (path.startsWith('/__test/')) {
    testRoute(req, res, path).catch((err) => {
      if (!(err instanceof HttpError)) console.error('provider.mjs: test endpoint error', err);
      if (!res.headersSent) {
        sendJson(res, err.status ?? err.statusCode ?? 500, { error: err.error ?? 'test_endpoint_error', error_description: err.message });
      } else {
        res.end();
      }
    });
    return;
  }
  if (!RFC8414 && path === '/.well-known/oauth-authorization-server') {
    sendJson(res, 404, { error: 'not_found', error_description: 'RFC 8414 metadata turned off (OIDC_RFC8414=0)' });
    return;
  }
  handler(req, res);
});

server.on('error', (err) => {
  console.error(`provider.mjs: cannot listen on 127.0.0.1:${port}: ${err.message}`);
  process.exit(1);
});

server.listen(port, '127.0.0.1', () => {
  issuer = `http://127.0.0.1:${server.address().port}`;
  buildProvider();
  process.stdout.write(`${JSON.stringify({
    issuer,
    jwks_uri: `${issuer}/jwks`,
    token_endpoint: `${issuer}/token`,
    authorization_endpoint: `${issuer}/auth`,
    introspection_endpoint: `${issuer}/token/introspection`,
    revocation_endpoint: `${issuer}/token/revocation`,
    registration_endpoint: `${issuer}/reg`,
    discovery: `${issuer}/.well-known/openid-configuration`,
    kid: keys.rsa.kid,
    es256_kid: keys.ec.kid,
    pid: process.pid,
  })}\n`);
  console.error(`provider.mjs: oidc-provider listening, issuer ${issuer}, access-token TTL ${TTL}s`);
});

function stop(signal) {
  if (DEBUG) console.error(`provider.mjs: stopping (${signal})`);
  server.close();
  server.closeAllConnections();
  process.exit(0);
}
process.on('SIGTERM', () => stop('SIGTERM'));
process.on('SIGINT', () => stop('SIGINT'));
if (watchStdin) {
  process.stdin.on('end', () => stop('stdin closed'));
  process.stdin.on('error', () => stop('stdin error'));
  process.stdin.resume();
}
