export * from './errors.js';
export {
  ExecutorClient,
  SUBPROTOCOL,
  connectURL,
  reconnectDelay,
  type Assignment,
  type ContentBlock,
  type ExecutorEvent,
  type ExecutorInfo,
  type ExecutorOptions,
  type Token,
  type ToolContext,
  type ToolHandler,
  type ToolResult,
} from './client.js';
export { bashTool } from './bash.js';
export { SANDBOX_WORKSPACE, SandboxUnavailableError, checkSandbox, runCommand, type SandboxOptions } from './sandbox.js';
export {
  EVENT_TURN_END,
  Turn,
  TurnCanceledError,
  type AgentHandler,
  type PlatformToolCall,
  type PlatformToolResult,
  type TokenGrant,
  type TurnStart,
} from './agent.js';
