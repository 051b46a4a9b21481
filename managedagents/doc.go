// Package managedagents holds the wire types of the Claude Managed Agents
// API as reins serves it: agents, environments, sessions, session events,
// content blocks and the error envelope. Field names follow the official
// Anthropic SDKs, which are the final word on the wire shape.
package managedagents
