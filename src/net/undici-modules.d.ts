// The undici module deliveries load by its path (net/pooled.ts), typed from undici's own
// declarations: the Agent class.
declare module 'undici/lib/dispatcher/agent.js' {
  import type { Agent } from 'undici';
  const AgentClass: typeof Agent;
  export default AgentClass;
}
