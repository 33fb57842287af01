package acp

import (
	"reflect"
	"testing"

	"github.com/opencode-server/opencode-server/catalog"
	"github.com/opencode-server/opencode-server/opencode"
)

// TestCatalogModels: the "model" choices, context sizes and accepted
// modalities come from the catalog: a session naming no model has the
// default's, one naming an unknown model has no size and takes text only.
func TestCatalogModels(t *testing.T) {
	c := (&catalog.Catalog{Model: "v/eye", Providers: []catalog.Provider{
		{ID: "s", Name: "Scripted", Models: []catalog.Model{{ID: "text", Name: "Text", Context: 100, InputModalities: []string{"text"}}}},
		{ID: "v", Name: "Vision", Models: []catalog.Model{{ID: "eye", Name: "Eye", Context: 200, InputModalities: []string{"text", "image"}}}},
	}}).Build()
	a := &Agent{catalog: catalog.NewLive(c)}
	if want, got := []modelChoice{{ID: "v/eye", Name: "Vision · Eye", Context: 200}, {ID: "s/text", Name: "Scripted · Text", Context: 100}}, modelChoices(c); !reflect.DeepEqual(got, want) {
		t.Errorf("choices %+v, want %+v", got, want)
	}
	def := opencode.Session{}
	text := opencode.Session{Model: &opencode.ModelRef{ProviderID: "s", ID: "text"}}
	gone := opencode.Session{Model: &opencode.ModelRef{ProviderID: "x", ID: "y"}}
	for _, tc := range []struct {
		name  string
		s     opencode.Session
		size  int64
		image bool
	}{{"default", def, 200, true}, {"text model", text, 100, false}, {"unknown model", gone, 0, false}} {
		if got := a.contextSize(tc.s); got != tc.size {
			t.Errorf("%s: contextSize %d, want %d", tc.name, got, tc.size)
		}
		if got := a.accepts(tc.s, "image"); got != tc.image {
			t.Errorf("%s: accepts image %v, want %v", tc.name, got, tc.image)
		}
		if !a.accepts(tc.s, "text") {
			t.Errorf("%s: text not accepted", tc.name)
		}
	}
	if !a.defaultAccepts("image") || a.defaultAccepts("pdf") {
		t.Error("defaultAccepts: want image, not pdf")
	}
	c.Model = "s/text"
	if a.defaultAccepts("image") {
		t.Error("a text-only default accepts images")
	}
	none := &Agent{}
	if none.defaultAccepts("image") || none.contextSize(def) != 0 || len(modelChoices(nil)) != 0 || !none.accepts(def, "text") {
		t.Error("no catalog: want no choices, size 0, text only")
	}
}
