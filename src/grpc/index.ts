export { CHECK_METHOD, GrpcListener, HEALTH_CHECK_METHOD, HEALTH_WATCH_METHOD, type GrpcListenerOptions } from './listener.js';
export { CONFIG_KEY_EXTENSION, parseCheckRequestMessage } from './check-request.js';
export { checkResponseFor, GRPC_CODE } from './check-response.js';
