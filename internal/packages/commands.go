package packages

import (
	"net/url"
	"strings"

	"github.com/reinsdev/reins/sandbox"
)

// proxyURL is the sandbox's egress proxy as install commands name it.
const proxyURL = "http://" + sandbox.ProxyAddr

func pipArgv(i *Installer, dir string, specs []string) []string {
	argv := []string{"python3", "-m", "pip", "install", "--no-cache-dir", "--disable-pip-version-check",
		"--no-input", "--no-warn-script-location", "--target", dir, "--proxy", proxyURL}
	if i.PipIndexURL != "" {
		argv = append(argv, "--index-url", i.PipIndexURL)
		// pip ignores a plain-http index unless told to trust it: the
		// operator who configured it does.
		if u, err := url.Parse(i.PipIndexURL); err == nil && u.Scheme == "http" {
			argv = append(argv, "--trusted-host", u.Host)
		}
	}
	return append(append(argv, "--"), specs...)
}

func npmArgv(i *Installer, dir string, specs []string) []string {
	argv := []string{"npm", "install", "--prefix", dir, "--no-audit", "--no-fund", "--no-update-notifier",
		"--cache", "/tmp/npm-cache", "--proxy", proxyURL, "--https-proxy", proxyURL}
	if i.NpmRegistry != "" {
		argv = append(argv, "--registry", i.NpmRegistry)
	}
	return append(append(argv, "--"), specs...)
}

// goArgv installs commands with `go install`, which needs a version:
// a spec without one gets @latest.
func goArgv(_ *Installer, _ string, specs []string) []string {
	argv := []string{"/usr/local/go/bin/go", "install", "--"}
	for _, s := range specs {
		if !strings.Contains(s, "@") {
			s += "@latest"
		}
		argv = append(argv, s)
	}
	return argv
}

func goEnv(i *Installer, dir string) []string {
	env := []string{"GOBIN=" + dir + "/bin", "GOPATH=/tmp/go", "GOCACHE=/tmp/go-cache", "GOTOOLCHAIN=local",
		"CGO_ENABLED=0", "GOFLAGS=-modcacherw"}
	if i.GoProxy != "" {
		env = append(env, "GOPROXY="+i.GoProxy)
	}
	if i.GoSumDB != "" {
		env = append(env, "GOSUMDB="+i.GoSumDB)
	}
	return env
}

func cargoArgv(_ *Installer, dir string, specs []string) []string {
	return append([]string{"cargo", "install", "--root", dir, "--"}, specs...)
}

func gemArgv(_ *Installer, dir string, specs []string) []string {
	return append([]string{"gem", "install", "--no-document", "--install-dir", dir, "--bindir", dir + "/bin",
		"--http-proxy", proxyURL, "--"}, specs...)
}
