package opencode

import "testing"

// TestKindsComplete: every code of the core has a row in the one table,
// with every protocol's column filled (JSON-RPC's 0 only for internal
// errors), and 4xx/5xx statuses.
func TestKindsComplete(t *testing.T) {
	codes := []Code{EInvalid, ENotFound, EConflict, ERevoked, EBusy, EUnavailable, EInternal,
		EUnauthorized, EForbidden, EMethod, ETooLarge, ETooMany}
	if len(codes) != len(Kinds) {
		t.Errorf("%d codes, %d rows", len(codes), len(Kinds))
	}
	for _, c := range codes {
		k, ok := Kinds[c]
		if !ok {
			t.Errorf("%s has no row", c)
			continue
		}
		if k.HTTP < 400 || k.HTTP > 599 || k.V1 == "" || k.V2 == "" || k.AGUI == "" || k.OpenAI == "" {
			t.Errorf("%s: incomplete row %+v", c, k)
		}
		if (k.RPC == 0) != (c == EInternal) {
			t.Errorf("%s: JSON-RPC code %d", c, k.RPC)
		}
	}
	if KindOf("no such code") != Kinds[EInternal] {
		t.Error("an unknown code is not internal")
	}
}
