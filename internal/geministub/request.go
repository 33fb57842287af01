package geministub

import (
	"encoding/json"
	"net/http"
	"strings"
)

// The generateContent request as the stub reads it, and the questions a
// Script asks of it.

// Request is a generateContent request as the stub understood it.
type Request struct {
	Contents          []Content         `json:"contents"`
	SystemInstruction *Content          `json:"systemInstruction,omitempty"`
	GenerationConfig  *GenerationConfig `json:"generationConfig,omitempty"`
	Tools             []Tool            `json:"tools,omitempty"`
	ToolConfig        json.RawMessage   `json:"toolConfig,omitempty"`

	// Model is the model of the URL path ("gemini-2.5-flash" for
	// models/gemini-2.5-flash).
	Model string `json:"-"`
	// Stream: the call was streamGenerateContent.
	Stream bool `json:"-"`
	// N is the 1-based arrival number of the request (title requests
	// apart).
	N int `json:"-"`
	// Header is the request's HTTP header.
	Header http.Header `json:"-"`
	// Raw is the request body as received.
	Raw json.RawMessage `json:"-"`
}

// Content is one conversation entry (role "user" or "model"), or the
// system instruction.
type Content struct {
	Role  string `json:"role,omitempty"`
	Parts []Part `json:"parts"`
}

// Text is the content's non-thought text parts joined.
func (c Content) Text() string {
	var b strings.Builder
	for _, p := range c.Parts {
		if !p.Thought {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// Part is one part of any kind.
type Part struct {
	Text             string            `json:"text,omitempty"`
	Thought          bool              `json:"thought,omitempty"`
	ThoughtSignature string            `json:"thoughtSignature,omitempty"`
	InlineData       *Blob             `json:"inlineData,omitempty"`
	FileData         *FileData         `json:"fileData,omitempty"`
	FunctionCall     *FunctionCall     `json:"functionCall,omitempty"`
	FunctionResponse *FunctionResponse `json:"functionResponse,omitempty"`
}

// Blob is inline data.
type Blob struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
}

// FileData is a file by URI.
type FileData struct {
	MimeType string `json:"mimeType"`
	FileURI  string `json:"fileUri"`
}

// FunctionCall is a model's call in the history.
type FunctionCall struct {
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

// FunctionResponse is a tool result.
type FunctionResponse struct {
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response,omitempty"`
}

// ResultText is the response's content as text: response.content when it
// is a string, else the response JSON.
func (f FunctionResponse) ResultText() string {
	var r struct {
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(f.Response, &r) == nil && len(r.Content) > 0 {
		var s string
		if json.Unmarshal(r.Content, &s) == nil {
			return s
		}
		return string(r.Content)
	}
	return string(f.Response)
}

// GenerationConfig is the request's generationConfig.
type GenerationConfig struct {
	MaxOutputTokens int             `json:"maxOutputTokens,omitempty"`
	Temperature     *float64        `json:"temperature,omitempty"`
	TopP            *float64        `json:"topP,omitempty"`
	TopK            *float64        `json:"topK,omitempty"`
	ThinkingConfig  *ThinkingConfig `json:"thinkingConfig,omitempty"`
}

// ThinkingConfig is generationConfig.thinkingConfig.
type ThinkingConfig struct {
	IncludeThoughts *bool  `json:"includeThoughts,omitempty"`
	ThinkingLevel   string `json:"thinkingLevel,omitempty"`
	ThinkingBudget  *int   `json:"thinkingBudget,omitempty"`
}

// Tool is one entry of tools.
type Tool struct {
	FunctionDeclarations []FunctionDeclaration `json:"functionDeclarations,omitempty"`
}

// FunctionDeclaration is a declared function.
type FunctionDeclaration struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// Declarations lists every declared function.
func (r Request) Declarations() []FunctionDeclaration {
	var out []FunctionDeclaration
	for _, t := range r.Tools {
		out = append(out, t.FunctionDeclarations...)
	}
	return out
}

// SystemText is the system instruction's text joined.
func (r Request) SystemText() string {
	if r.SystemInstruction == nil {
		return ""
	}
	return r.SystemInstruction.Text()
}

// LastContent is the request's last content (zero if none).
func (r Request) LastContent() Content {
	if len(r.Contents) == 0 {
		return Content{}
	}
	return r.Contents[len(r.Contents)-1]
}

// LastUserText is the text of the last user content with text ("" if none).
func (r Request) LastUserText() string {
	for i := len(r.Contents) - 1; i >= 0; i-- {
		if c := r.Contents[i]; c.Role == "user" {
			if t := c.Text(); t != "" {
				return t
			}
		}
	}
	return ""
}

// LastIsToolResult reports whether the last content carries function
// responses.
func (r Request) LastIsToolResult() bool {
	c := r.LastContent()
	for _, p := range c.Parts {
		if p.FunctionResponse != nil {
			return c.Role == "user"
		}
	}
	return false
}

// IsTitle reports whether req is a session's title request: no tools and
// a system instruction about a title.
func (r Request) IsTitle() bool {
	return len(r.Declarations()) == 0 && strings.Contains(strings.ToLower(r.SystemText()), "title")
}
