package main

import "testing"

func TestCheckExposure(t *testing.T) {
	for _, tc := range []struct {
		host, password string
		insecure, ok   bool
	}{
		{"127.0.0.1", "", false, true},
		{"::1", "", false, true},
		{"localhost", "", false, true},
		{"0.0.0.0", "", false, false},
		{"192.168.1.5", "", false, false},
		{"0.0.0.0", "secret", false, true},
		{"0.0.0.0", "", true, true},
	} {
		err := checkExposure(tc.host, tc.password, tc.insecure)
		if (err == nil) != tc.ok {
			t.Errorf("checkExposure(%q, %q, %v) = %v, want ok=%v", tc.host, tc.password, tc.insecure, err, tc.ok)
		}
	}
}
