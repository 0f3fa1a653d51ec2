// The rich status a Fairshoe error carries in its `grpc-status-details-bin` trailer (a
// google.rpc.Status), decoded with protobufjs from googleapis' own google/rpc protos (vendored in
// googleapis/, Apache-2.0): the ErrorInfo's reason code and metadata (amounts in minor units
// under `*_minor` keys, `hand_id`, `currency`...) and the BadRequest's field. A client renders
// from these, not from the message text.
'use strict';

const path = require('node:path');
const protobuf = require('protobufjs');

const GOOGLEAPIS = path.join(__dirname, 'googleapis');
const ERROR_INFO = 'google.rpc.ErrorInfo';
const BAD_REQUEST = 'google.rpc.BadRequest';

let types = null;

function loadTypes() {
  if (types === null) {
    const root = new protobuf.Root();
    // google/protobuf/*.proto resolve to protobufjs's bundled copies
    root.resolvePath = (origin, target) => path.join(GOOGLEAPIS, target);
    root.loadSync(['google/rpc/status.proto', 'google/rpc/error_details.proto'],
      { keepCase: true });
    types = {
      Status: root.lookupType('google.rpc.Status'),
      [ERROR_INFO]: root.lookupType(ERROR_INFO),
      [BAD_REQUEST]: root.lookupType(BAD_REQUEST),
    };
  }
  return types;
}

// { reason, metadata, field, description } of a grpc-js error (each '' or {} when absent).
function statusDetails(err) {
  const out = { reason: '', metadata: {}, field: '', description: '' };
  const raw = err && err.metadata ? err.metadata.get('grpc-status-details-bin') : [];
  if (!raw.length) return out;
  const loaded = loadTypes();
  let status;
  try {
    status = loaded.Status.decode(raw[0]);
  } catch (decodeError) { // not a google.rpc.Status: the message is all there is
    return out;
  }
  for (const any of status.details) {
    const name = any.type_url.slice(any.type_url.lastIndexOf('/') + 1);
    if (name === ERROR_INFO) {
      const info = loaded[ERROR_INFO].decode(any.value);
      out.reason = info.reason;
      out.metadata = { ...info.metadata };
    } else if (name === BAD_REQUEST) {
      const [violation] = loaded[BAD_REQUEST].decode(any.value).field_violations;
      if (violation) {
        out.field = violation.field;
        out.description = violation.description;
      }
    }
  }
  if (!out.field && out.metadata.field) out.field = out.metadata.field;
  return out;
}

module.exports = { statusDetails };
