package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// managedAgentsFamilies are the endpoint families of the Managed Agents
// API in the SDK's list (the first segment after /v1/), and the
// organization webhook endpoints whose shape reins's webhooks take.
var managedAgentsFamilies = []string{"agents", "sessions", "environments", "vaults", "skills", "files",
	"memory_stores", "dreams", "deployments", "deployment_runs", "organizations/webhooks"}

// sdkEndpoint matches an endpoint of the Go SDK's api.md.
var sdkEndpoint = regexp.MustCompile(`title="(get|post|put|patch|delete) (/v1/[^"]+)"`)

// TestAPICoverage measures which of the official Go SDK's Managed Agents
// endpoints reins serves: each is requested on a live server with
// placeholder ids, and one that only the catch-all answers ("no route")
// is not served. The README's coverage line must say what it measured.
func TestAPICoverage(t *testing.T) {
	s := start(t, options{})
	served, total := map[string]int{}, map[string]int{}
	var missing []string
	for _, ep := range sdkEndpoints(t) {
		family := endpointFamily(ep[1])
		if family == "" {
			continue
		}
		total[family]++
		if routed(t, s, ep[0], ep[1]) {
			served[family]++
		} else {
			missing = append(missing, ep[0]+" "+ep[1])
		}
	}
	var parts []string
	sum, all := 0, 0
	for _, f := range managedAgentsFamilies {
		parts = append(parts, fmt.Sprintf("%s %d/%d", f, served[f], total[f]))
		sum, all = sum+served[f], all+total[f]
	}
	line := fmt.Sprintf("%d of the %d Managed Agents endpoints of the Go SDK v2.17.0 (%s)", sum, all, strings.Join(parts, ", "))
	t.Log(line)
	t.Logf("not served: %s", strings.Join(missing, "; "))
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(readme, []byte(line)) {
		t.Errorf("the README does not say what was measured; it should read:\n%s", line)
	}
}

// sdkEndpoints lists the (method, path) pairs of the SDK's api.md, once
// each, in order.
func sdkEndpoints(t *testing.T) [][2]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/anthropics/anthropic-sdk-go/v2").Output()
	if err != nil {
		t.Fatalf("locate the SDK: %v", err)
	}
	doc, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	var eps [][2]string
	for _, m := range sdkEndpoint.FindAllStringSubmatch(string(doc), -1) {
		ep := [2]string{strings.ToUpper(m[1]), m[2]}
		if !slices.Contains(eps, ep) {
			eps = append(eps, ep)
		}
	}
	if len(eps) < 100 {
		t.Fatalf("found %d endpoints in the SDK's api.md: its format changed", len(eps))
	}
	return eps
}

// endpointFamily is the family of path among managedAgentsFamilies, "" for
// another API's.
func endpointFamily(path string) string {
	rest := strings.TrimPrefix(path, "/v1/")
	for _, f := range managedAgentsFamilies {
		if rest == f || strings.HasPrefix(rest, f+"/") {
			return f
		}
	}
	return ""
}

// placeholder is what a path parameter is given.
var placeholder = regexp.MustCompile(`\{[^}]+\}`)

// routed reports whether the server routes method path (with placeholder
// ids) to an endpoint, rather than to its "no route" catch-all.
func routed(t *testing.T, s *server, method, path string) bool {
	t.Helper()
	var body io.Reader
	if method != http.MethodGet && method != http.MethodDelete {
		body = strings.NewReader("{}")
	}
	req, err := http.NewRequest(method, s.url+placeholder.ReplaceAllString(path, "x_coverage"), body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-api-key", s.key)
	req.Header.Set("content-type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct {
		Error struct{ Message string } `json:"error"`
	}
	json.NewDecoder(resp.Body).Decode(&e)
	return !(resp.StatusCode == http.StatusNotFound && strings.HasPrefix(e.Error.Message, "no route for"))
}
