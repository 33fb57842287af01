package main

import (
	"os"
	"testing"

	"github.com/opencode-server/opencode-server/routes"
)

// TestWebFlags: the web app is proxied from $OPENCODE_WEB_APP_URL, else
// OpenCode's app.opencode.ai; --web-dir serves a directory instead and
// --no-web turns it off; the two together are refused.
func TestWebFlags(t *testing.T) {
	for _, tc := range []struct {
		env      string
		args     []string
		url, dir string
		refused  bool
	}{
		{"", nil, routes.DefaultWebAppURL, "", false},
		{"http://127.0.0.1:5173", nil, "http://127.0.0.1:5173", "", false},
		{"http://127.0.0.1:5173", []string{"--no-web"}, "", "", false},
		{"", []string{"--web-dir", "/srv/app"}, "", "/srv/app", false},
		{"", []string{"--no-web", "--web-dir", "/srv/app"}, "", "", true},
	} {
		t.Setenv("OPENCODE_WEB_APP_URL", tc.env)
		o, err := parseFlags(append([]string{"--directory", t.TempDir()}, tc.args...), os.Stderr)
		if tc.refused {
			if err == nil {
				t.Errorf("%v: accepted", tc.args)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", tc.args, err)
			continue
		}
		if got := webURL(o); got != tc.url || o.webDir != tc.dir {
			t.Errorf("env %q %v: web URL %q dir %q, want %q %q", tc.env, tc.args, got, o.webDir, tc.url, tc.dir)
		}
	}
}
