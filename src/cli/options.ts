// The options the commands share, each described once (help text included).
import type { OptionSpec } from './args.js';

export const DEFAULT_ADMIN_URL = 'http://127.0.0.1:9090';

export const CONFIG: OptionSpec = { name: 'config', type: 'string', value: 'FILE', help: 'YAML configuration (default: $ROOMGATE_CONFIG, else built-in defaults)' };
export const BACKEND: OptionSpec = {
  name: 'backend',
  type: 'string',
  multiple: true,
  value: 'URL',
  help: 'a backend, repeatable ("http://host:port" or "id=http://host:port"); replaces the configured list',
};
export const PORT: OptionSpec = { name: 'port', type: 'string', value: 'N', help: 'public port (default 8080, or $ROOMGATE_PORT)' };
export const HOST: OptionSpec = {
  name: 'host',
  type: 'string',
  value: 'ADDR',
  help: 'public listen address (default $ROOMGATE_HOST, else listen.host: 0.0.0.0, the demo 127.0.0.1)',
};
export const WORKERS: OptionSpec = {
  name: 'workers',
  type: 'string',
  value: 'N',
  help: 'N worker processes on the one port (1-64, or auto = one per CPU; default 1 or $ROOMGATE_WORKERS)',
};
export const BALANCE: OptionSpec = {
  name: 'balance',
  type: 'string',
  value: 'HOW',
  help: 'how --workers share the port: kernel (each accepts its own, SO_REUSEPORT; default on Linux) or primary (it hands each connection on); default $ROOMGATE_BALANCE',
};
export const ADMIN: OptionSpec = {
  name: 'admin',
  type: 'string',
  value: 'URL',
  help: `the running gateway's admin API (default $ROOMGATE_ADMIN_URL, else ${DEFAULT_ADMIN_URL})`,
};
export const TOKEN: OptionSpec = { name: 'token', type: 'string', value: 'T', help: "the gateway's admin.token (default $ROOMGATE_ADMIN_TOKEN)" };
export const DEADLINE: OptionSpec = { name: 'deadline', type: 'string', value: 'D', help: 'when the rooms still there are closed: 90s, 10m, 1h (default 10m)' };
export const OFFLINE: OptionSpec = { name: 'offline', type: 'boolean', help: 'ask no gateway: the ring owner a new room would get, from the configuration' };
export const JSON_OUT: OptionSpec = { name: 'json', type: 'boolean', help: 'print JSON (stable fields, for scripts)' };
export const HELP: OptionSpec = { name: 'help', type: 'boolean', short: 'h', help: "this command's help" };
export const VERSION: OptionSpec = { name: 'version', type: 'boolean', short: 'v', help: 'the version' };
export const TO: OptionSpec = { name: 'to', type: 'string', value: 'BACKEND', help: 'the backend the room moves to (an id, as roomgate status lists them)' };
export const HANDOFF_ID: OptionSpec = { name: 'id', type: 'string', value: 'ID', help: 'the handoff id: running the command again with it is the same handoff, not a second one' };
export const WAIT: OptionSpec = {
  name: 'wait',
  type: 'boolean',
  help: 'with --handoff: wait until the drain has handed off every room it can, then print what became of its rooms and sockets',
};
export const HANDOFF: OptionSpec = {
  name: 'handoff',
  type: 'boolean',
  help: 'hand off every live room of BACKEND now, with its state, instead of waiting for them to empty',
};
