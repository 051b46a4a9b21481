package toolhost

import (
	"encoding/base64"
	"strings"
	"testing"

	ma "github.com/reinsdev/reins/managedagents"
)

func TestRedactForms(t *testing.T) {
	v := "s3cr3t-value-0123456789"
	sec := secret{name: "TOKEN", value: v}
	outputs := []string{
		"plain " + v + " end",
		"rev " + reverse(v),
		"b64 " + base64.StdEncoding.EncodeToString([]byte(v)),
		"b64 in a longer string " + base64.StdEncoding.EncodeToString([]byte("user:"+v)),
		"b64 offset 1 " + base64.StdEncoding.EncodeToString([]byte("x"+v+"yz")),
		"b64 offset 2 " + base64.URLEncoding.EncodeToString([]byte("xy"+v)),
		"raw " + base64.RawStdEncoding.EncodeToString([]byte(v)),
	}
	for _, out := range outputs {
		c := []ma.ContentBlock{{Type: "text", Text: out}}
		redact(c, []secret{sec})
		if !strings.Contains(c[0].Text, "[redacted credential TOKEN]") {
			t.Errorf("not redacted: %q → %q", out, c[0].Text)
		}
	}
	short := []ma.ContentBlock{{Type: "text", Text: "abc and cba"}}
	redact(short, []secret{{name: "S", value: "abc"}})
	if short[0].Text != "abc and cba" {
		t.Errorf("a 3-byte value was redacted: %q", short[0].Text)
	}
}
