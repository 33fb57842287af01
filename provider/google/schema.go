package google

import "strconv"

// toolParameters is a tool's input schema as OpenCode 1.18.33 and the AI
// SDK send it to Gemini: OpenCode's ProviderTransform.schema rewrite for
// Gemini (when sanitize), then @ai-sdk/google's
// convertJSONSchemaToOpenAPISchema. ok is false when the SDK sends no
// parameters (an empty object schema) or the schema is not JSON.
func toolParameters(raw []byte, sanitize bool) (out []byte, ok bool) {
	v, err := parseJSON(raw)
	if err != nil {
		// The AI SDK would not get this far with a broken schema; an
		// object without parameters is the closest request.
		return nil, false
	}
	if sanitize {
		v = sanitizeGemini(v)
	}
	s := openAPISchema(v, true)
	if _, u := s.(undefined); u {
		return nil, false
	}
	return appendValue(nil, s), true
}

func isArray(v any) bool { _, ok := v.([]any); return ok }

// hasCombiner: an object with an anyOf, oneOf or allOf array.
func hasCombiner(v any) bool {
	o, ok := v.(*object)
	return ok && (isArray(o.get("anyOf")) || isArray(o.get("oneOf")) || isArray(o.get("allOf")))
}

// schemaIntent lists the keys that make an object a schema with a type
// of its own (OpenCode's check before defaulting array items to strings).
var schemaIntent = []string{"type", "properties", "items", "prefixItems", "enum", "const", "$ref",
	"additionalProperties", "patternProperties", "required", "not", "if", "then", "else"}

func hasSchemaIntent(v any) bool {
	o, ok := v.(*object)
	if !ok {
		return false
	}
	if hasCombiner(o) {
		return true
	}
	for _, k := range schemaIntent {
		if o.has(k) {
			return true
		}
	}
	return false
}

// sanitizeGemini is OpenCode 1.18.33's ProviderTransform.schema for a
// model whose provider is "google" or whose API ID contains "gemini"
// (provider/transform.ts, as bundled):
//
//	if (K==="enum"&&Array.isArray(U)) { G[K]=U.map((B)=>String(B)); if (G.type==="integer"||G.type==="number") G.type="string" }
//	else if (typeof U==="object"&&U!==null) G[K]=Y(U); else G[K]=U
//	if (Array.isArray(G.type)) { … U.length===0 ? G.type="null" : (delete G.type, G.anyOf=U.map((B)=>({type:B})), K && (G.nullable=!0)) }
//	if (G.type==="object"&&G.properties&&Array.isArray(G.required)) G.required=G.required.filter((K)=>(K in G.properties))
//	if (G.type==="array"&&!X(G)) { if (G.items==null) G.items={}; if (Q(G.items)&&!J(G.items)) G.items.type="string" }
//	if (G.type&&G.type!=="object"&&!X(G)) delete G.properties, delete G.required
//
// Keys keep their order; the enum rule sees only a type that came before
// the enum.
func sanitizeGemini(v any) any {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = sanitizeGemini(e)
		}
		return out
	case *object:
		g := &object{keys: make([]string, 0, len(x.keys)), vals: make([]any, 0, len(x.keys))}
		for i, k := range x.keys {
			u := x.vals[i]
			if arr, ok := u.([]any); ok && k == "enum" {
				strs := make([]any, len(arr))
				for j, e := range arr {
					strs[j] = jsString(e)
				}
				g.set(k, strs)
				if t := g.get("type"); t == "integer" || t == "number" {
					g.set("type", "string")
				}
				continue
			}
			switch u.(type) {
			case *object, []any:
				g.set(k, sanitizeGemini(u))
			default:
				g.set(k, u)
			}
		}
		if types, ok := g.get("type").([]any); ok {
			hasNull := false
			var rest []any
			for _, t := range types {
				if t == "null" {
					hasNull = true
				} else {
					rest = append(rest, t)
				}
			}
			if len(rest) == 0 {
				g.set("type", "null")
			} else {
				g.del("type")
				alts := make([]any, len(rest))
				for i, t := range rest {
					alts[i] = &object{keys: []string{"type"}, vals: []any{t}}
				}
				g.set("anyOf", alts)
				if hasNull {
					g.set("nullable", true)
				}
			}
		}
		typ := g.get("type")
		if req, ok := g.get("required").([]any); ok && typ == "object" && truthy(g.get("properties")) {
			props := g.get("properties")
			kept := []any{}
			for _, r := range req {
				if inOperator(r, props) {
					kept = append(kept, r)
				}
			}
			g.set("required", kept)
		}
		if typ == "array" && !hasCombiner(g) {
			items := g.get("items")
			if items == nil || items == undefinedValue {
				items = &object{}
				g.set("items", items)
			}
			if it, ok := items.(*object); ok && !hasSchemaIntent(it) {
				it.set("type", "string")
			}
		}
		if truthy(typ) && typ != "object" && !hasCombiner(g) {
			g.del("properties")
			g.del("required")
		}
		return g
	}
	return v
}

// inOperator is JavaScript's (key in container) for a JSON container.
func inOperator(key, container any) bool {
	k := jsString(key)
	switch c := container.(type) {
	case *object:
		return c.has(k)
	case []any:
		if k == "length" {
			return true
		}
		n, err := strconv.Atoi(k)
		return err == nil && strconv.Itoa(n) == k && n >= 0 && n < len(c)
	}
	return false // JavaScript throws; the requirement is dropped
}

// isEmptyObjectSchema is the AI SDK's: type "object" with no properties
// and no (truthy) additionalProperties.
func isEmptyObjectSchema(v any) bool {
	o, ok := v.(*object)
	if !ok || o.get("type") != "object" {
		return false
	}
	props := o.get("properties")
	empty := props == nil || props == undefinedValue
	if p, ok := props.(*object); ok && len(p.keys) == 0 {
		empty = true
	}
	return empty && !truthy(o.get("additionalProperties"))
}

func typeObject(t any) *object { return &object{keys: []string{"type"}, vals: []any{t}} }

// openAPISchema is @ai-sdk/google's convertJSONSchemaToOpenAPISchema
// (3.0.73): the JSON Schema keywords Gemini takes, in the SDK's order;
// everything else is dropped.
func openAPISchema(v any, root bool) any {
	if v == nil || v == undefinedValue {
		return undefinedValue
	}
	if isEmptyObjectSchema(v) {
		if root {
			return undefinedValue
		}
		o := v.(*object)
		if d := o.get("description"); truthy(d) {
			return &object{keys: []string{"type", "description"}, vals: []any{"object", d}}
		}
		return typeObject("object")
	}
	if _, ok := v.(bool); ok {
		return &object{keys: []string{"type", "properties"}, vals: []any{"boolean", &object{}}}
	}
	s, ok := v.(*object)
	if !ok {
		return &object{} // destructuring a number, string or array finds nothing
	}
	r := &object{}
	if d := s.get("description"); truthy(d) {
		r.set("description", d)
	}
	if req := s.get("required"); truthy(req) {
		r.set("required", req)
	}
	if f := s.get("format"); truthy(f) {
		r.set("format", f)
	}
	if c := s.get("const"); c != undefinedValue {
		r.set("enum", []any{c})
	}
	if t := s.get("type"); truthy(t) {
		if types, ok := t.([]any); ok {
			hasNull := false
			var rest []any
			for _, x := range types {
				if x == "null" {
					hasNull = true
				} else {
					rest = append(rest, x)
				}
			}
			if len(rest) == 0 {
				r.set("type", "null")
			} else {
				alts := make([]any, len(rest))
				for i, x := range rest {
					alts[i] = typeObject(x)
				}
				r.set("anyOf", alts)
				if hasNull {
					r.set("nullable", true)
				}
			}
		} else {
			r.set("type", t)
		}
	}
	if e := s.get("enum"); e != undefinedValue {
		r.set("enum", e)
	}
	if p := s.get("properties"); p != nil && p != undefinedValue {
		props := &object{}
		switch pp := p.(type) {
		case *object:
			for i, k := range pp.keys {
				props.set(k, openAPISchema(pp.vals[i], false))
			}
		case []any:
			for i, e := range pp {
				props.set(strconv.Itoa(i), openAPISchema(e, false))
			}
		}
		r.set("properties", props)
	}
	if items := s.get("items"); truthy(items) {
		if arr, ok := items.([]any); ok {
			r.set("items", convertAll(arr))
		} else {
			r.set("items", openAPISchema(items, false))
		}
	}
	if all, ok := s.get("allOf").([]any); ok {
		r.set("allOf", convertAll(all))
	}
	if any_, ok := s.get("anyOf").([]any); ok {
		var rest []any
		hasNull := false
		for _, x := range any_ {
			if o, ok := x.(*object); ok && o.get("type") == "null" {
				hasNull = true
			} else {
				rest = append(rest, x)
			}
		}
		switch {
		case !hasNull:
			r.set("anyOf", convertAll(any_))
		case len(rest) == 1:
			if c, ok := openAPISchema(rest[0], false).(*object); ok {
				r.set("nullable", true)
				for i, k := range c.keys {
					r.set(k, c.vals[i])
				}
			}
		default:
			r.set("anyOf", convertAll(rest))
			r.set("nullable", true)
		}
	}
	if one, ok := s.get("oneOf").([]any); ok {
		r.set("oneOf", convertAll(one))
	}
	if m := s.get("minLength"); m != undefinedValue {
		r.set("minLength", m)
	}
	return r
}

func convertAll(arr []any) []any {
	out := make([]any, len(arr))
	for i, x := range arr {
		out[i] = openAPISchema(x, false)
	}
	return out
}
