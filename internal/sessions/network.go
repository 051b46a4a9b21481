package sessions

import (
	"net/url"

	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/sandbox/egress"
)

// NetworkPolicy is the one rule of which hosts a session of env may
// reach, for the egress proxy of its sandboxes, for web_fetch and for
// the MCP check of a deployment's runs: every host unless its networking
// is limited, else its allowed_hosts plus, as it asks, the package
// registries and the hosts of the session's MCP servers (session is
// called only then).
func NetworkPolicy(env *ma.Environment, session func() (*ma.Session, error)) (egress.Policy, error) {
	n := env.Config.Networking
	if n == nil || n.Type != "limited" {
		return egress.Policy{Unrestricted: true}, nil
	}
	hosts := append([]string{}, n.AllowedHosts...)
	if n.AllowPackageManagers != nil && *n.AllowPackageManagers {
		hosts = append(hosts, egress.PackageRegistryHosts()...)
	}
	if n.AllowMCPServers != nil && *n.AllowMCPServers {
		sess, err := session()
		if err != nil {
			return egress.Policy{}, err
		}
		hosts = append(hosts, MCPHosts(sess.Agent.MCPServers)...)
	}
	return egress.Policy{AllowedHosts: hosts}, nil
}

// MCPHosts returns the hosts of MCP servers.
func MCPHosts(servers []ma.MCPServer) []string {
	var hosts []string
	for _, srv := range servers {
		if u, err := url.Parse(srv.URL); err == nil && u.Hostname() != "" {
			hosts = append(hosts, u.Hostname())
		}
	}
	return hosts
}

// BlockedMCPHost returns the host of an MCP server of agent that a
// session of env may not reach by env's network policy (ok false when
// it may reach all of them).
func BlockedMCPHost(env *ma.Environment, agent *ma.SessionAgent) (host string, ok bool) {
	sess := &ma.Session{Agent: *agent}
	policy, _ := NetworkPolicy(env, func() (*ma.Session, error) { return sess, nil }) // session() cannot fail
	for _, h := range MCPHosts(agent.MCPServers) {
		if !policy.Permits(h) {
			return h, true
		}
	}
	return "", false
}
