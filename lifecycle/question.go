package lifecycle

import (
	"context"
	"sort"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/tool"
)

// questionReply is the user's answers, or a dismissal.
type questionReply struct {
	answers  [][]string
	rejected bool
}

type pendingQuestion struct {
	req   opencode.QuestionRequest
	reply chan questionReply
}

// questionAsk is a question tool's goroutine asking the runner to put its
// questions to the user.
type questionAsk struct {
	callID    string
	questions []opencode.QuestionInfo
	resp      chan chan questionReply
}

// askFunc is the tool.Call.Ask of a call on step n: the question goes to
// the runner (question.asked), the answer comes from the reply route.
func (r *runner) askFunc(n int64, callID string) func(context.Context, []opencode.QuestionInfo) ([][]string, error) {
	return func(ctx context.Context, qs []opencode.QuestionInfo) ([][]string, error) {
		q := &questionAsk{callID: callID, questions: qs, resp: make(chan chan questionReply, 1)}
		r.post(streamMsg{step: n, question: q})
		var reply chan questionReply
		select {
		case reply = <-q.resp:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if reply == nil {
			return nil, tool.ErrDismissed
		}
		select {
		case a := <-reply:
			if a.rejected {
				return nil, tool.ErrDismissed
			}
			return a.answers, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// onQuestion registers a question on the runner and announces it.
func (r *runner) onQuestion(st *step, q *questionAsk) {
	c := st.call(q.callID)
	if c == nil {
		q.resp <- nil
		return
	}
	req := opencode.QuestionRequest{ID: r.m.ids.Ascending(identifier.Question), SessionID: r.id, Questions: q.questions,
		Tool: &opencode.PermissionTool{MessageID: c.messageID, CallID: c.callID}}
	pq := &pendingQuestion{req: req, reply: make(chan questionReply, 1)}
	r.m.mu.Lock()
	r.m.questions[req.ID] = pq
	r.m.mu.Unlock()
	r.publishLive(req)
	q.resp <- pq.reply
}

// Questions is GET /question: every pending question, oldest first.
func (m *Manager) Questions() []opencode.QuestionRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]opencode.QuestionRequest, 0, len(m.questions)+len(m.remoteQuestions))
	for _, q := range m.questions {
		out = append(out, q.req)
	}
	for _, r := range m.remoteQuestions {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// ReplyQuestion answers a pending question (answers: the chosen labels of
// each question, in order); reject dismisses it.
func (m *Manager) ReplyQuestion(ctx context.Context, requestID string, answers [][]string, reject bool) error {
	m.mu.Lock()
	q := m.questions[requestID]
	m.mu.Unlock()
	if q == nil {
		return &opencode.Error{Code: opencode.ENotFound, Resource: "question", RequestID: requestID,
			Message: "Question request not found: " + requestID}
	}
	var err error
	derr := m.do(ctx, q.req.SessionID, func(r *runner) { err = r.answerQuestion(requestID, questionReply{answers: answers, rejected: reject}) })
	if derr != nil {
		return derr
	}
	return err
}

// answerQuestion delivers a reply on the runner and announces it.
func (r *runner) answerQuestion(requestID string, a questionReply) error {
	r.m.mu.Lock()
	q := r.m.questions[requestID]
	delete(r.m.questions, requestID)
	r.m.mu.Unlock()
	if q == nil {
		return &opencode.Error{Code: opencode.ENotFound, Resource: "question", RequestID: requestID,
			Message: "Question request not found: " + requestID}
	}
	if a.rejected {
		r.publishLive(opencode.QuestionRejected{SessionID: r.id, RequestID: requestID})
	} else {
		if a.answers == nil {
			a.answers = [][]string{}
		}
		r.publishLive(opencode.QuestionReplied{SessionID: r.id, RequestID: requestID, Answers: a.answers})
	}
	q.reply <- a
	return nil
}

// rejectQuestions dismisses the session's pending questions (abort,
// shutdown).
func (r *runner) rejectQuestions() {
	r.m.mu.Lock()
	ids := sessionKeys(r.m.questions, r.id, func(q *pendingQuestion) string { return q.req.SessionID })
	r.m.mu.Unlock()
	for _, id := range ids {
		_ = r.answerQuestion(id, questionReply{rejected: true})
	}
}
