package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/opencode-server/opencode-server/opencode"
)

// ErrDismissed is a question the user dismissed.
var ErrDismissed = errors.New("The user dismissed this question") // OpenCode's words: its web app and the model read them

// Question asks the user questions through the client's question dialog
// and waits for the answers (Call.Ask).
type Question struct{}

func (Question) Name() string { return "question" }

func (Question) Description() string {
	return `Ask the user one or more questions while you work: to clarify an ambiguous request, to learn a preference, or to let them choose between approaches.

- Each question has a short header (at most 30 characters), the full question, and a few options, each a short label (1-5 words) with a description.
- Set multiple to true when more than one option may be chosen.
- The user can also type an answer of their own; do not add an "Other" option.
- If you recommend an option, put it first and add "(Recommended)" to its label.
- Answers come back in the order of the questions, each as the list of chosen labels.`
}

func (Question) Parameters() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"questions":{"type":"array","description":"Questions to ask","items":{"type":"object","properties":{` +
		`"question":{"type":"string","description":"Complete question"},` +
		`"header":{"type":"string","description":"Very short label (max 30 chars)"},` +
		`"options":{"type":"array","description":"Available choices","items":{"type":"object","properties":{` +
		`"label":{"type":"string","description":"Display text (1-5 words, concise)"},` +
		`"description":{"type":"string","description":"Explanation of choice"}},"required":["label","description"]}},` +
		`"multiple":{"type":"boolean","description":"Allow selecting multiple choices"}},"required":["question","header","options"]}}},"required":["questions"]}`)
}

func (t Question) input(c Call) ([]opencode.QuestionInfo, error) {
	var in struct {
		Questions []opencode.QuestionInfo `json:"questions"`
	}
	if err := decode(t.Name(), c.Input, &in); err != nil {
		return nil, err
	}
	if len(in.Questions) == 0 {
		return nil, errors.New("invalid input for tool question: questions must not be empty")
	}
	for i, q := range in.Questions {
		if q.Question == "" || q.Header == "" || q.Options == nil {
			return nil, fmt.Errorf("invalid input for tool question: questions[%d] needs question, header and options", i)
		}
	}
	return in.Questions, nil
}

// Permission: the question tool needs the "question" permission (OpenCode
// denies it by default and allows it for build and plan).
func (t Question) Permission(c Call) (string, []string, error) {
	if _, err := t.input(c); err != nil {
		return "", nil, err
	}
	return "question", []string{"*"}, nil
}

// Run asks and answers as OpenCode does: "User has answered your
// questions: "Q"="A, B", ..." with the answers in the metadata.
func (t Question) Run(ctx context.Context, c Call) (Result, error) {
	qs, err := t.input(c)
	if err != nil {
		return Result{}, err
	}
	if c.Ask == nil {
		return Result{}, errors.New("no client can answer questions here")
	}
	answers, err := c.Ask(ctx, qs)
	if err != nil {
		return Result{}, err
	}
	parts := make([]string, len(qs))
	for i, q := range qs {
		a := "Unanswered"
		if i < len(answers) && len(answers[i]) > 0 {
			a = strings.Join(answers[i], ", ")
		}
		parts[i] = `"` + q.Question + `"="` + a + `"`
	}
	title := fmt.Sprintf("Asked %d question", len(qs))
	if len(qs) > 1 {
		title += "s"
	}
	return Result{Title: title,
		Output:   "User has answered your questions: " + strings.Join(parts, ", ") + ". You can now continue with the user's answers in mind.",
		Metadata: map[string]any{"answers": answers}}, nil
}
