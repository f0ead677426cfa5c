// A Confluent Schema Registry in memory, over HTTP, for the tests and for
// trying Avro topics (no package of one exists for Debian): the REST calls
// that outbox and consumers make, with Confluent's status codes, error
// bodies ({"error_code": ..., "message": ...}) and content type.  Schema
// ids are global: the same schema under another subject gets the same id.
// Compatibility (BACKWARD by default, as Confluent's) is judged with avsc,
// the library consumers decode with: a schema can read data written with
// another if avsc can make a resolver between them.  USAGE below says how
// to run it; test/schema_registry runs it, installing avsc first.
//
// Beside Confluent's API, for the tests:
//   GET /__requests	how many requests came, by "METHOD path" (these
//			excepted), and in all (total)
//   POST /__next	the next answer, whatever is asked: {"status": N,
//			"body": text, "repeat": N (the body that many times),
//			"delay_ms": N (before answering)}

'use strict';

const fs = require('fs');
const http = require('http');
const https = require('https');
const path = require('path');
const readline = require('readline');

const USAGE = `Usage: test/schema_registry [--port N] [--user USER:PASSWORD]
                            [--tls CERT,KEY [--client-ca CA]]

A Confluent Schema Registry in memory (what it holds is lost when it ends).
test/schema_registry installs what it needs from npm (avsc, into
t/drivers/node_modules) the first time, then runs node test/schema_registry.js
with these options.  Prints its URL once it listens, on 127.0.0.1, then
serves until interrupted (Ctrl-C, SIGTERM).

  --port N               the port (0, the default: a free one)
  --user USER:PASSWORD   every request must carry these credentials (HTTP
                         basic auth), else 401
  --tls CERT,KEY         serve HTTPS with this certificate and key (PEM)
  --client-ca CA         with --tls: only to clients whose certificate CA
                         signed
  --help                 print this and exit

When stdin is a pipe (how the tests start it), each line on it is a
command, answered "ok", and the pipe's end stops the registry:
  down    stop listening and drop every connection (what it holds stays)
  up      listen again, on the same port
`;

// Print the usage to stderr and exit 2: the command line is wrong.
function usageError(problem) {
	process.stderr.write(`schema_registry: ${problem}\n${USAGE.split('\n')[0]}\n` +
		'(test/schema_registry --help says more)\n');
	process.exit(2);
}

let port = 0;
let user = null;
let tls = null;
for (let i = 2; i < process.argv.length; i += 2) {
	const option = process.argv[i];
	const value = process.argv[i + 1];
	if (option === '--help' || option === '-h') {
		process.stdout.write(USAGE);
		process.exit(0);
	}
	if (value === undefined)
		usageError(`${option} needs a value`);
	if (option === '--port' && /^[0-9]+$/.test(value) && Number(value) < 65536)
		port = Number(value);
	else if (option === '--user')
		user = value;
	else if (option === '--tls' && value.includes(',')) {
		const [cert, key] = value.split(',');
		tls = { cert: fs.readFileSync(cert), key: fs.readFileSync(key) };
	} else if (option === '--client-ca' && tls)
		Object.assign(tls, { ca: fs.readFileSync(value), requestCert: true, rejectUnauthorized: true });
	else
		usageError(`unexpected argument "${option} ${value}"`);
}

// avsc from t/drivers/node_modules (test/schema_registry and the tests
// install it there) or any place node looks
let avsc;
try {
	avsc = require(require.resolve('avsc', {
		paths: [path.join(__dirname, '..', 't', 'drivers'), __dirname]
	}));
} catch (e) {
	console.error('schema_registry: avsc is not installed: start the registry with ' +
		'test/schema_registry, which installs it');
	process.exit(1);
}

const MEDIA_TYPE = 'application/vnd.schemaregistry.v1+json';
const LEVELS = ['NONE', 'BACKWARD', 'BACKWARD_TRANSITIVE', 'FORWARD',
	'FORWARD_TRANSITIVE', 'FULL', 'FULL_TRANSITIVE'];

const schemas = [];			// by id - 1: {schema (canonical text), type}
const subjects = new Map();	// subject -> [id of version 1, of version 2, ...]
let compatibility = 'BACKWARD';
const subjectCompatibility = new Map();
const requests = { total: 0 };
let next = null;			// the answer POST /__next set

class Refusal extends Error {
	constructor(status, code, message) {
		super(message);
		this.status = status;
		this.code = code;
	}
}

// A long of any size, for a schema with a long's default past 2^53, which
// JSON.parse rounds (Java's registry keeps it: Debezium's bigint defaults)
const anyLong = avsc.types.LongType.__with({
	fromBuffer: (buf) => buf.readBigInt64LE(),
	toBuffer: (n) => {
		const buf = Buffer.alloc(8);
		buf.writeBigInt64LE(BigInt(n));
		return buf;
	},
	fromJSON: BigInt,
	toJSON: Number,
	isValid: (n) => typeof n === 'bigint' || Number.isInteger(n),
	compare: (a, b) => (a < b ? -1 : a > b ? 1 : 0),
});

// Has the JSON text an integer past what a JavaScript number holds exactly?
function hasUnsafeInteger(text) {
	for (const m of text.matchAll(/"(?:[^"\\]|\\.)*"|(-?\d{16,})(?![.eE\d])/g))
		if (m[1] && !Number.isSafeInteger(Number(m[1])))
			return true;
	return false;
}

// An Avro schema's type and canonical text, or 42201; one with an integer
// past 2^53 as given, less white space, its longs of any size
function parseSchema(text) {
	try {
		const json = JSON.parse(text);

		if (hasUnsafeInteger(text))
			return {
				schema: text.replace(/"(?:[^"\\]|\\.)*"|\s+/g, (m) => (m[0] === '"' ? m : '')),
				type: avsc.Type.forSchema(json, {
					typeHook: (s) => (s === 'long' || (s && s.type === 'long') ? anyLong : undefined),
				}),
			};
		return { schema: JSON.stringify(json), type: avsc.Type.forSchema(json) };
	} catch (e) {
		throw new Refusal(422, 42201, `Invalid schema ${text}, details: ${e.message}`);
	}
}

function versionsOf(subject) {
	const versions = subjects.get(subject);
	if (!versions)
		throw new Refusal(404, 40401, `Subject '${subject}' not found.`);
	return versions;
}

function levelOf(subject) {
	return subjectCompatibility.get(subject) || compatibility;
}

// Can reader read what writer wrote?  The reason if not.
function cannotRead(reader, writer) {
	try {
		reader.createResolver(writer);
		return null;
	} catch (e) {
		return e.message;
	}
}

// Why type cannot join subject under its compatibility level: a list,
// empty if it can
function incompatibilities(subject, type) {
	const level = levelOf(subject);
	const ids = subjects.get(subject) || [];
	const against = level.endsWith('_TRANSITIVE') ? ids : ids.slice(-1);
	const problems = [];
	for (const id of against) {
		const old = schemas[id - 1].type;
		if (level.startsWith('BACKWARD') || level.startsWith('FULL')) {
			const why = cannotRead(type, old);
			if (why)
				problems.push(`the new schema cannot read data of version ${ids.indexOf(id) + 1}: ${why}`);
		}
		if (level.startsWith('FORWARD') || level.startsWith('FULL')) {
			const why = cannotRead(old, type);
			if (why)
				problems.push(`version ${ids.indexOf(id) + 1} cannot read data of the new schema: ${why}`);
		}
	}
	return problems;
}

function register(subject, body) {
	const { schema, type } = parseSchema(body.schema);
	const ids = subjects.get(subject) || [];
	const known = ids.find((id) => schemas[id - 1].schema === schema);
	if (known)
		return { id: known };
	const problems = incompatibilities(subject, type);
	if (problems.length > 0)
		throw new Refusal(409, 409,
			`Schema being registered is incompatible with an earlier schema for subject "${subject}", details: [${problems.join('; ')}]`);
	let id = schemas.findIndex((s) => s.schema === schema) + 1;
	if (id === 0) {
		schemas.push({ schema, type });
		id = schemas.length;
	}
	subjects.set(subject, [...ids, id]);
	return { id };
}

function version(subject, which) {
	const ids = versionsOf(subject);
	const n = which === 'latest' ? ids.length : Number(which);
	if (!Number.isInteger(n) || n < 1 || n > ids.length)
		throw new Refusal(404, 40402, `Version ${which} not found.`);
	return { subject, version: n, id: ids[n - 1], schema: schemas[ids[n - 1] - 1].schema };
}

function setLevel(body, subject) {
	const level = body.compatibility;
	if (!LEVELS.includes(level))
		throw new Refusal(422, 42203, `Invalid compatibility level. Valid values are none, backward, forward, full, backward_transitive, forward_transitive, and full_transitive`);
	if (subject === undefined)
		compatibility = level;
	else
		subjectCompatibility.set(subject, level);
	return { compatibility: level };
}

// The answer to a request: [status, object]
function route(method, url, body) {
	const parts = url.split('?')[0].split('/').slice(1).map(decodeURIComponent);
	const [a, b, c, d, e] = parts;
	const is = (m, n) => method === m && parts.length === n;

	if (is('POST', 3) && a === 'subjects' && c === 'versions')
		return register(b, body);
	if (is('GET', 3) && a === 'schemas' && b === 'ids') {
		const s = schemas[Number(c) - 1];
		if (!Number.isInteger(Number(c)) || !s)
			throw new Refusal(404, 40403, `Schema ${c} not found`);
		return { schema: s.schema };
	}
	if (is('GET', 1) && a === 'subjects')
		return [...subjects.keys()];
	if (is('GET', 3) && a === 'subjects' && c === 'versions')
		return versionsOf(b).map((_, i) => i + 1);
	if (is('GET', 4) && a === 'subjects' && c === 'versions')
		return version(b, d);
	if (is('POST', 5) && a === 'compatibility' && b === 'subjects' && d === 'versions') {
		version(c, e);
		const { type } = parseSchema(body.schema);
		const problems = incompatibilities(c, type);
		return problems.length ? { is_compatible: false, messages: problems } : { is_compatible: true };
	}
	if (a === 'config' && parts.length <= 2) {
		if (method === 'PUT')
			return setLevel(body, b);
		if (method === 'GET' && b === undefined)
			return { compatibilityLevel: compatibility };
		if (method === 'GET' && subjectCompatibility.has(b))
			return { compatibilityLevel: subjectCompatibility.get(b) };
		if (method === 'GET')
			throw new Refusal(404, 40408, `Subject '${b}' does not have subject-level compatibility configured`);
	}
	throw new Refusal(404, 404, 'HTTP 404 Not Found');
}

function answer(res, status, object) {
	const text = JSON.stringify(object);
	res.writeHead(status, { 'Content-Type': MEDIA_TYPE, 'Content-Length': Buffer.byteLength(text) });
	res.end(text);
}

function serve(req, res, text) {
	const key = `${req.method} ${req.url}`;
	if (req.method === 'GET' && req.url === '/__requests')
		return answer(res, 200, requests);
	requests.total++;
	requests[key] = (requests[key] || 0) + 1;

	const authorization = req.headers.authorization || '';
	if (user !== null &&
		authorization !== 'Basic ' + Buffer.from(user).toString('base64')) {
		res.setHeader('WWW-Authenticate', 'Basic realm="SchemaRegistry"');
		return answer(res, 401, { error_code: 401, message: 'Unauthorized' });
	}
	if (req.method === 'POST' && req.url === '/__next') {
		next = JSON.parse(text);
		return answer(res, 200, {});
	}
	if (next !== null) {
		const canned = next;
		next = null;
		return setTimeout(() => {
			res.writeHead(canned.status, { 'Content-Type': MEDIA_TYPE });
			res.end(canned.body.repeat(canned.repeat || 1));
		}, canned.delay_ms || 0);
	}
	try {
		let body = {};
		if (text !== '') {
			try {
				body = JSON.parse(text);
			} catch (e) {
				throw new Refusal(400, 400, `Unexpected character: ${e.message}`);
			}
		}
		return answer(res, 200, route(req.method, req.url, body));
	} catch (e) {
		if (!(e instanceof Refusal))
			throw e;
		return answer(res, e.status, { error_code: e.code, message: e.message });
	}
}

const sockets = new Set();
const handler = (req, res) => {
	const chunks = [];
	req.on('data', (chunk) => chunks.push(chunk));
	req.on('end', () => serve(req, res, Buffer.concat(chunks).toString('utf8')));
};
const server = tls ? https.createServer(tls, handler) : http.createServer(handler);
server.on(tls ? 'secureConnection' : 'connection', (socket) => {
	sockets.add(socket);
	socket.on('close', () => sockets.delete(socket));
});

server.listen(port, '127.0.0.1', () => {
	port = server.address().port;
	console.log(`${tls ? 'https' : 'http'}://127.0.0.1:${port}`);
});

// commands from a pipe only: a terminal's would stop a registry started
// with & (SIGTTIN), and /dev/null's end would stop it at once
const stdin = fs.fstatSync(0);
if (stdin.isFIFO() || stdin.isSocket())
	readline.createInterface({ input: process.stdin }).on('line', (line) => {
		if (line === 'down') {
			server.close(() => {});
			for (const socket of sockets)
				socket.destroy();
			console.log('ok');
		} else if (line === 'up')
			server.listen(port, '127.0.0.1', () => console.log('ok'));
		else
			console.log(`unknown command: ${line}`);
	}).on('close', () => process.exit(0));
