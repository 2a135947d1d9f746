export { GrpcListener, GRPC_MAX_CONNECTIONS, GRPC_TRANSPORT_MAX_MESSAGE_BYTES, type GrpcListenerOptions } from './listener.js';
export { CONFIG_KEY_EXTENSION, parseCheckRequestMessage } from './check-request.js';
export { checkResponseFor, GRPC_CODE } from './check-response.js';
