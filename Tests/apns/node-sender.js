// The classic Node.js APNs sender (node:http2 and an ES256 provider token, nothing else), as the
// docs/relays.md shows it, with only its host changed to the relay. Used by relay_test.py.
//   APNS_HOST=localhost:PORT KEY_FILE=AuthKey.p8 KEY_ID=… TEAM_ID=… TOPIC=… DEVICE=<64 hex> \
//   BODY='{"aps":…}' NODE_EXTRA_CA_CERTS=ca.pem node node-sender.js
// Prints one JSON line: {"status":…, "apns-id":…, "outcome":…, "body":…}.
const http2 = require('node:http2');
const crypto = require('node:crypto');
const fs = require('node:fs');

const host = process.env.APNS_HOST; // was: api.push.apple.com
const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
const unsigned =
  b64({alg: 'ES256', kid: process.env.KEY_ID}) + '.' +
  b64({iss: process.env.TEAM_ID, iat: Math.floor(Date.now() / 1000)});
const signature = crypto
  .sign('sha256', Buffer.from(unsigned), {key: fs.readFileSync(process.env.KEY_FILE), dsaEncoding: 'ieee-p1363'})
  .toString('base64url');

const session = http2.connect('https://' + host);
session.on('error', (error) => {
  console.error(String(error));
  process.exit(2);
});
const request = session.request({
  ':method': 'POST',
  ':path': '/3/device/' + process.env.DEVICE,
  authorization: 'bearer ' + unsigned + '.' + signature,
  'apns-topic': process.env.TOPIC,
  'apns-push-type': 'alert',
});
let status;
let headers;
let body = '';
request.on('response', (h) => {
  headers = h;
  status = h[':status'];
});
request.setEncoding('utf8');
request.on('data', (chunk) => (body += chunk));
request.on('end', () => {
  console.log(JSON.stringify({status, 'apns-id': headers['apns-id'], outcome: headers['x-pushmedia-outcome'], body}));
  session.close();
});
request.end(process.env.BODY);
